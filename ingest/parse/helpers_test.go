package parse

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// eq fails the test when got != want.
func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

// fixtureLines returns the lines of testdata/name.
func fixtureLines(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatalf("open fixture: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("read fixture %s: %v", name, err)
	}
	return out
}

// fixtureLine returns the first line of a fixture containing substr.
func fixtureLine(tb testing.TB, name, substr string) string {
	tb.Helper()
	for _, l := range fixtureLines(tb, name) {
		if strings.Contains(l, substr) {
			return l
		}
	}
	tb.Fatalf("no line with %q in %s", substr, name)
	return ""
}

func mustNew(tb testing.TB, f Format, opts ParseOptions) Parser {
	tb.Helper()
	p, err := New(f, opts)
	if err != nil {
		tb.Fatalf("New(%s): %v", f, err)
	}
	return p
}

func parseOne(tb testing.TB, f Format, opts ParseOptions, line string) Parsed {
	tb.Helper()
	return mustNew(tb, f, opts).Parse(Record{Raw: []byte(line), Length: int64(len(line)), Lines: 1, LineNo: 1})
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func nanotime() int64 { return time.Now().UnixNano() }
