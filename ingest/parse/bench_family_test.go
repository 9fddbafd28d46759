package parse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// benchFamilies are the line families of BenchmarkFamily: the bulk of a
// real incident's lines. Each selects records from the real-line corpus
// and the format fixtures by what the Classifier made of them, so the
// benchmark follows the registry instead of a hand-picked line list.
var benchFamilies = []struct {
	name string
	pick func(Parsed) bool
}{
	{"sglang-batch", func(p Parsed) bool { return p.Family == "sglang" && p.Kind == KindBatch }},
	{"sglang-request", func(p Parsed) bool {
		return p.Family == "sglang" && p.Kind == KindEngine && (p.Event == "received" || p.Event == "finished")
	}},
	// Every other scheduler/tokenizer line: boot facts, failures, noise.
	{"sglang-other", func(p Parsed) bool {
		return p.Family == "sglang" && p.Kind != KindBatch && !(p.Kind == KindEngine && (p.Event == "received" || p.Event == "finished"))
	}},
	{"sglang-request-json", func(p Parsed) bool { return p.Family == "sglang-request-json" }},
	{"mooncake-glog", func(p Parsed) bool { return p.Family == "mooncake-glog" }},
	{"gateway-json", func(p Parsed) bool { return p.Family == "gateway-json" }},
	{"prometheus", func(p Parsed) bool { return p.Family == "prometheus" }},
}

type benchSource struct {
	hint Format
	recs []Record
}

// benchRecords returns, per family, the records of the corpus and the
// fixtures that belong to it, grouped by source (so each runs under its
// source's hint, as ingest runs it).
func benchRecords(b *testing.B) map[string][]benchSource {
	b.Helper()
	out := map[string][]benchSource{}
	for _, name := range diffInputs(b) {
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		hint := Detect(data)
		c, err := NewClassifier(hint, ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		picked := map[string][]Record{}
		r := NewReader(bytes.NewReader(data), ReaderOptions{SingleLine: SingleLine(hint)})
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			p := c.Parse(rec)
			for _, f := range benchFamilies {
				if f.pick(p) {
					picked[f.name] = append(picked[f.name], rec)
					break
				}
			}
		}
		for fam, recs := range picked {
			out[fam] = append(out[fam], benchSource{hint: hint, recs: recs})
		}
	}
	return out
}

// BenchmarkFamily parses the real lines of each family through the
// Classifier, as ingest does; one op is one record. Run with -benchmem:
// allocs/op is what the parser allocates per line. cpu-ns/op is the
// process's CPU time per line (garbage collection included), which a
// loaded machine distorts far less than ns/op.
func BenchmarkFamily(b *testing.B) {
	all := benchRecords(b)
	for _, f := range benchFamilies {
		srcs := all[f.name]
		if len(srcs) == 0 {
			b.Fatalf("no corpus or fixture line of family %s", f.name)
		}
		b.Run(f.name, func(b *testing.B) {
			type run struct {
				c    *Classifier
				recs []Record
			}
			var runs []run
			var n, bytes int
			for _, s := range srcs {
				c, err := NewClassifier(s.hint, ParseOptions{DefaultTime: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
				if err != nil {
					b.Fatal(err)
				}
				runs = append(runs, run{c, s.recs})
				for _, r := range s.recs {
					n++
					bytes += len(r.Raw)
				}
			}
			b.SetBytes(int64(bytes / n))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			i := 0
		loop:
			for {
				for _, r := range runs {
					for _, rec := range r.recs {
						if i == b.N {
							break loop
						}
						r.c.Parse(rec)
						i++
					}
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(n), "lines")
		})
	}
}
