package parse

import (
	"testing"
)

// BenchmarkSGLangParse measures the typical hot lines: batch lines and
// request Receive/Finish lines. Reports lines/s.
func BenchmarkSGLangParse(b *testing.B) {
	lines := []string{
		fixtureLine(b, "sglang_real.log", "Prefill batch, #new-seq: 1, #new-token: 8192"),
		fixtureLine(b, "sglang_real.log", "Decode batch, #running-req: 24"),
		fixtureLine(b, "sglang_drift.log", "Receive: obj="),
		fixtureLine(b, "sglang_drift.log", "Finish: obj="),
		fixtureLine(b, "sglang_real.log", "Decode transfer failed"),
		"[2026-08-20 10:00:00 DP0 TP0] Some other info line that is not extracted at all, which must stay cheap",
	}
	recs := make([]Record, len(lines))
	for i, l := range lines {
		recs[i] = Record{Raw: []byte(l)}
	}
	p := mustNew(b, FormatSGLang, ParseOptions{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.Parse(recs[i%len(recs)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

func BenchmarkReader(b *testing.B) {
	data := joinLines(fixtureLines(b, "sglang_drift.log"))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		readAll(b, data, ReaderOptions{})
	}
}

// BenchmarkClassifierOverhead parses the same hot lines through the
// Classifier (line-level classification) and directly through the SGLang
// parser, in the same run, and reports the ratio of the two.
func BenchmarkClassifierOverhead(b *testing.B) {
	lines := []string{
		fixtureLine(b, "sglang_real.log", "Prefill batch, #new-seq: 1, #new-token: 8192"),
		fixtureLine(b, "sglang_real.log", "Decode batch, #running-req: 24"),
		fixtureLine(b, "sglang_drift.log", "Receive: obj="),
		fixtureLine(b, "sglang_drift.log", "Finish: obj="),
		fixtureLine(b, "sglang_real.log", "Decode transfer failed"),
		"[2026-08-20 10:00:00 DP0 TP0] Some other info line that is not extracted at all, which must stay cheap",
	}
	recs := make([]Record, len(lines))
	for i, l := range lines {
		recs[i] = Record{Raw: []byte(l)}
	}
	direct := mustNew(b, FormatSGLang, ParseOptions{})
	c, err := NewClassifier(FormatSGLang, ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var tDirect, tClass int64
	for i := 0; i < b.N; i++ {
		r := recs[i%len(recs)]
		t0 := nanotime()
		direct.Parse(r)
		t1 := nanotime()
		c.Parse(r)
		tDirect += t1 - t0
		tClass += nanotime() - t1
	}
	b.ReportMetric(float64(tClass)/float64(max(tDirect, 1)), "classifier/direct")
}
