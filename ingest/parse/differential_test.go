package parse

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The differential test pins every field of every Parsed the parsers
// return for the corpus and the format fixtures, as the parsers returned
// them before the allocation work of issue 16 (testdata/parsed_full.txt was
// written by that code). golden.jsonl pins a summary per record; this file
// pins the whole result (payload structs, pair lists, More, TSInferred,
// the time zone of TS), so a faster parser that reads any line differently
// fails here.
//
// A large input can be compared the same way between two builds:
//
//	go test ./ingest/parse -run TestParsedFullDiff -dump-dir DIR -dump-out OUT
//
// writes the dump of every file under DIR to OUT; compare the OUT files of
// the two builds with cmp.

var (
	updateFull = flag.Bool("update-full", false, "rewrite testdata/parsed_full.txt")
	dumpDir    = flag.String("dump-dir", "", "TestParsedFullDiff: dump the parse of every file under this directory")
	dumpOut    = flag.String("dump-out", "", "TestParsedFullDiff: write the dump here")
)

const fullGolden = "testdata/parsed_full.txt"

// diffInputs are the files the differential test reads: the corpus and
// every format fixture.
func diffInputs(tb testing.TB) []string {
	tb.Helper()
	var names []string
	for _, pat := range []string{"testdata/corpus/*.log", "testdata/*.log", "testdata/*.jsonl", "testdata/*.om", "testdata/*.prom"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			tb.Fatal(err)
		}
		names = append(names, m...)
	}
	sort.Strings(names)
	if len(names) < 40 {
		tb.Fatalf("only %d input files", len(names))
	}
	return names
}

// dumpFile parses data as ingest does (Detect, then the Classifier) and,
// for a second reading, under every hint, writing one line per record.
func dumpFile(tb testing.TB, w io.Writer, name string, data []byte) {
	tb.Helper()
	detected := Detect(data)
	hints := []Format{detected}
	if detected != FormatUnknown {
		hints = append(hints, FormatUnknown)
	}
	opts := ParseOptions{DefaultTime: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), ClockOffset: 250 * time.Millisecond}
	for _, hint := range hints {
		c, err := NewClassifier(hint, opts)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		r := NewReader(bytes.NewReader(data), ReaderOptions{SingleLine: SingleLine(hint)})
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				tb.Fatalf("%s: %v", name, err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s:%d hint=%s ", name, rec.LineNo, hint)
			dumpValue(&b, reflect.ValueOf(c.Parse(rec)))
			b.WriteByte('\n')
			if _, err := io.WriteString(w, b.String()); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// dumpValue writes v canonically: pointers followed, zero fields left out,
// floats exact (NaN and ±Inf included), times with their zone.
func dumpValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteByte('&')
		dumpValue(b, v.Elem())
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			if t.IsZero() {
				b.WriteString("0")
				return
			}
			name, off := t.Zone()
			fmt.Fprintf(b, "%s[%s %d]", t.Format(time.RFC3339Nano), name, off)
			return
		}
		b.WriteByte('{')
		first := true
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.IsZero() {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			first = false
			b.WriteString(v.Type().Field(i).Name)
			b.WriteByte(':')
			dumpValue(b, f)
		}
		b.WriteByte('}')
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			dumpValue(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) {
			b.WriteString("NaN")
			return
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

func TestParsedFullGolden(t *testing.T) {
	var buf bytes.Buffer
	for _, name := range diffInputs(t) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		dumpFile(t, &buf, strings.TrimPrefix(filepath.ToSlash(name), "testdata/"), data)
	}
	if *updateFull {
		if err := os.WriteFile(fullGolden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(fullGolden)
	if err != nil {
		t.Fatalf("%v (run with -update-full to create it)", err)
	}
	got, exp := strings.Split(buf.String(), "\n"), strings.Split(string(want), "\n")
	bad := 0
	for i := 0; i < max(len(got), len(exp)); i++ {
		g, e := "", ""
		if i < len(got) {
			g = got[i]
		}
		if i < len(exp) {
			e = exp[i]
		}
		if g != e {
			if bad++; bad <= 20 {
				t.Errorf("line %d:\n got  %s\n want %s", i+1, g, e)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d records read differently", bad, len(exp))
	}
}

// TestParsedFullDiff dumps a directory given with -dump-dir (see the file
// comment); without it there is nothing to do.
func TestParsedFullDiff(t *testing.T) {
	if *dumpDir == "" || *dumpOut == "" {
		t.Skip("needs -dump-dir and -dump-out")
	}
	out, err := os.Create(*dumpOut)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	files := 0
	err = filepath.WalkDir(*dumpDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(*dumpDir, path)
		dumpFile(t, w, rel, data)
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files dumped to %s", files, *dumpOut)
}
