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
// largest part of it). Opening and aborting the INSERTs (server round
// trips) is outside the timer; no row reaches the server. Reported as
// ns/sample.
func BenchmarkMetricColumns(b *testing.B) { benchColumns(b, ingest.MetricBlock, "ns/sample") }

// BenchmarkRawColumns is the writer's client-side cost per raw line:
// building raw_lines' columns (and the line_sources row) and the driver's
// appends, as BenchmarkMetricColumns. Reported as ns/line.
func BenchmarkRawColumns(b *testing.B) { benchColumns(b, ingest.RawBlock, "ns/line") }

// benchColumns times filling the columns of a block of 8,192 rows, the
// INSERTs opened and aborted outside the timer, and reports the time per
// row as unit.
func benchColumns(b *testing.B, block func(int) ([]string, func(context.Context, ingest.Store) ([]ingest.TableWriter, error),
	func([]ingest.TableWriter) error), unit string) {
	s := testdb.New(b)
	ctx := context.Background()
	const n = 8192
	tables, open, fill := block(n)
	b.Logf("tables written: %v", tables)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		xs, err := open(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := fill(xs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for _, x := range xs {
			_ = x.Abort()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), unit)
}
