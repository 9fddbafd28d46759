package ingest_test

import (
	"context"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// BenchmarkMetricColumns is the writer's client-side cost per Prometheus
// sample: building the metric tables' columns and the driver's appends
// (docs/parse-speed.md named the label arrays of metric_samples the
// largest part of it). Reported as ns/sample; no row reaches the server.
func BenchmarkMetricColumns(b *testing.B) {
	s := testdb.New(b)
	ctx := context.Background()
	const n = 8192
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := ingest.FillMetricBlock(ctx, s, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}
