package simulate

import (
	"context"
	"runtime"
	"testing"
)

// BenchmarkMillionRequests generates about 1M requests (abort-race at scale
// 17) with all their log lines. Run with:
//
//	go test ./simulate -run '^$' -bench MillionRequests -benchtime 1x
func BenchmarkMillionRequests(b *testing.B) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := Run(context.Background(), Config{Scenario: "abort-race", Seed: 1, Scale: 17, OutDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		sec := b.Elapsed().Seconds()
		b.ReportMetric(float64(s.Requests), "requests")
		b.ReportMetric(float64(s.Requests)/sec, "requests/s")
		b.ReportMetric(float64(s.Lines)/sec, "lines/s")
		b.ReportMetric(float64(s.Bytes)/(1<<20), "MB")
		b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heap-inuse-MB")
	}
}
