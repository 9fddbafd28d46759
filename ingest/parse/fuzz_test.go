package parse

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addFixtureSeeds seeds a fuzzer with every line of the named fixtures.
func addFixtureSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		for _, l := range fixtureLines(f, name) {
			f.Add(l)
		}
	}
}

// checkParse runs one parser over line and asserts the invariants every
// parser must keep: no panic (implicit), raw bytes untouched, a reason for
// every malformed result, a known status.
func checkParse(t *testing.T, p Parser, line string) Parsed {
	raw := []byte(line)
	keep := bytes.Clone(raw)
	out := p.Parse(Record{Raw: raw, Length: int64(len(raw)), Lines: 1, LineNo: 1})
	if !bytes.Equal(raw, keep) {
		t.Fatalf("parser modified the raw line")
	}
	switch out.Status {
	case StatusParsed, StatusUnknown, StatusNoise:
	case StatusMalformed:
		if out.Reason == "" {
			t.Fatalf("malformed without reason: %q", line)
		}
	default:
		t.Fatalf("bad status %q", out.Status)
	}
	if !out.TS.IsZero() && out.TS.Location().String() != "UTC" {
		t.Fatalf("ts not UTC: %v", out.TS)
	}
	return out
}

func FuzzSGLangLine(f *testing.F) {
	addFixtureSeeds(f, "sglang_real.log", "sglang_drift.log")
	f.Fuzz(func(t *testing.T, line string) {
		out := checkParse(t, mustNew(t, FormatSGLang, ParseOptions{}), line)
		if len(out.More) > maxGlued+1 {
			t.Fatalf("%d glued messages", len(out.More))
		}
	})
}

// FuzzClassifier: any line, under any hint, keeps the parser invariants.
func FuzzClassifier(f *testing.F) {
	addFixtureSeeds(f, "sglang_real.log", "glog_drift.log", "modelgateway_real.log", "corpus/mooncake-851.log",
		"corpus/sglang-12076.log", "corpus/sglang-7338.log", "corpus/mooncake-682.log")
	f.Fuzz(func(t *testing.T, line string) {
		for _, hint := range []Format{FormatUnknown, FormatSGLang, FormatGlog, FormatPrometheus} {
			c, err := NewClassifier(hint, ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkParse(t, c, line)
		}
	})
}

func FuzzReader(f *testing.F) {
	for _, name := range []string{"sglang_real.log", "sglang_drift.log", "glog_drift.log", "prometheus_drift.prom"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(0), false)
		f.Add(b, uint16(40), false)
	}
	f.Add([]byte("a\r\n  b\r\nTraceback (most recent call last):\nx\n\n[2026"), uint16(3), false)
	// A traceback ended by a line read on its own (sglang #38552).
	if b, err := os.ReadFile(filepath.Join("testdata", "corpus", "sglang-38552.log")); err == nil {
		f.Add(b, uint16(0), false)
	} else {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, max uint16, single bool) {
		recs := readAll(t, data, ReaderOptions{MaxRecordBytes: int(max), SingleLine: single})
		checkTiling(t, data, recs)
		for _, r := range recs {
			if lim := int(max); lim > 0 && len(r.Raw) > lim {
				t.Fatalf("record keeps %d bytes over the %d cap", len(r.Raw), lim)
			}
		}
	})
}

func FuzzGateway(f *testing.F) {
	addFixtureSeeds(f, "gateway.jsonl", "modelgateway_real.log", "modelgateway_drift.log", "pages.jsonl", "request_metrics.jsonl")
	mapped := &GatewayMapping{Fields: FieldMapping{"tenant": "headers.x-tenant-id", "ts": "a.b.c"}}
	f.Fuzz(func(t *testing.T, line string) {
		for _, fm := range []Format{FormatGateway, FormatModelGateway, FormatPageEvents, FormatRequestMetrics} {
			checkParse(t, mustNew(t, fm, ParseOptions{}), line)
		}
		checkParse(t, mustNew(t, FormatGateway, ParseOptions{Gateway: mapped}), line)
		Detect([]byte(line))
	})
}

func FuzzPythonRepr(f *testing.F) {
	for _, l := range fixtureLines(f, "sglang_drift.log") {
		if i := strings.Index(l, "obj="); i >= 0 {
			f.Add(l[i+4:])
		}
	}
	for _, name := range []string{"corpus/sglang-15759.log", "corpus/sglang-19027.log", "corpus/sglang-4045.log"} {
		for _, l := range fixtureLines(f, name) {
			if i := strings.Index(l, "obj="); i >= 0 {
				f.Add(l[i+4:])
			}
			if i := strings.Index(l, "out="); i >= 0 {
				f.Add(l[i+4:])
			}
		}
	}
	f.Add(`X(a=1 > 0, b=<E.Y: 2>), c={'k': (1, ')')}, d=3`)
	f.Add(`{'meta_info': {'finish_reason': {'type': 'abort'}, 'id': 'x'},}, tail`)
	f.Add(`ServerArgs(a='x\'', b=[1, (2, {3: '4'})], c=<E.X: 1>, d='h' ... 't')`)
	f.Add(`{'a': "\x41\u00e9\U0001F600\\", 'b': b'x'}`)
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i <= len(s) && i < 8; i++ {
			if j := pyScan(s, i, ",:"); j < i || j > len(s) {
				t.Fatalf("pyScan(%d) = %d out of range", i, j)
			}
		}
		pyKwargs(s, func(k, v string) bool {
			if !strings.Contains(s, k) || !strings.Contains(s, v) {
				t.Fatalf("pair not from input: %q=%q", k, v)
			}
			pyString(v)
			pyFirst(v)
			return true
		})
		body, _, _ := pyBody(s)
		pyDict(body, func(k, v string) bool { pyText(k); pyText(v); return true })
		samePairs(t, s)
		pyString(s)
		e := &EngineEvent{}
		reqObjRepr(e, s)
		metaInfoRepr(e, s)
	})
}

func FuzzGlog(f *testing.F) {
	addFixtureSeeds(f, "glog_real.log", "glog_drift.log")
	f.Fuzz(func(t *testing.T, line string) {
		p := mustNew(t, FormatGlog, ParseOptions{})
		checkParse(t, p, line)
		checkParse(t, p, line) // second call exercises the year state
	})
}

func FuzzPrometheus(f *testing.F) {
	addFixtureSeeds(f, "prometheus_real.om", "prometheus_drift.prom")
	f.Fuzz(func(t *testing.T, line string) {
		out := checkParse(t, mustNew(t, FormatPrometheus, ParseOptions{}), line)
		for _, s := range out.Metrics {
			if len(s.LabelKeys) != len(s.LabelValues) {
				t.Fatal("label keys and values differ in length")
			}
			for i := 1; i < len(s.LabelKeys); i++ {
				if s.LabelKeys[i-1] > s.LabelKeys[i] {
					t.Fatal("labels not sorted")
				}
			}
			if s.SeriesID != SeriesID(s.Name, s.LabelKeys, s.LabelValues) {
				t.Fatal("series id mismatch")
			}
		}
	})
}

// samePairs holds pyOpen to pyBody: iterating the rest after the opening
// bracket gives the pairs of the body (pyKwargs may add a last ("", "")
// at the closer, which no caller reads).
func samePairs(t *testing.T, v string) {
	t.Helper()
	body, open, _ := pyBody(v)
	rest, open2 := pyOpen(v)
	if open != open2 {
		t.Fatalf("pyOpen bracket %q, pyBody %q", open2, open)
	}
	pairs := func(s string, dict bool) []string {
		var out []string
		fn := func(k, v string) bool { out = append(out, k, v); return true }
		if dict {
			pyDict(s, fn)
		} else {
			pyKwargs(s, fn)
		}
		return out
	}
	for _, dict := range []bool{false, true} {
		want, got := pairs(body, dict), pairs(rest, dict)
		if !dict && len(got) == len(want)+2 && got[len(got)-2] == "" && got[len(got)-1] == "" {
			got = got[:len(want)]
		}
		if strings.Join(want, "\x00") != strings.Join(got, "\x00") || len(want) != len(got) {
			t.Fatalf("dict=%v: pairs of pyOpen %q, of pyBody %q", dict, got, want)
		}
	}
}
