package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// FillMetricBlock is the client's share of writing n Prometheus samples
// (17 series on one node, as a simulated .prom file has): it builds their
// tables' columns and appends them to INSERTs opened on s, then aborts
// them, so what is timed is row building and the driver's encoding, not
// the server. For BenchmarkMetricColumns.
func FillMetricBlock(ctx context.Context, s Store, n int) error {
	var b Batch
	base := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		k, v := []string{"engine_type", "model_name", "pp_rank", "tp_rank"}, []string{"prefill", "glm-5.2", "0", fmt.Sprint(i % 17)}
		name := "sglang:num_used_tokens"
		ts := base.Add(time.Duration(i/17) * 5 * time.Minute)
		b.metrics = append(b.metrics, metricRow{node: "prefill-0", source: "/data/metrics/prefill-0/2026-07-04.prom",
			m: parse.MetricSample{TS: ts, TSMs: ts.UnixMilli(), Name: name, SeriesID: parse.SeriesID(name, k, v),
				LabelKeys: k, LabelValues: v, Value: float64(i)}})
	}
	_, typed := tableWrites(&b, base, nil)
	for _, t := range typed {
		if t.n == 0 {
			continue
		}
		x, err := s.OpenInsert(ctx, t.name, t.cols)
		if err != nil {
			return err
		}
		for lo := 0; lo < t.n; lo += blockRows {
			if err := t.fill(x, lo, min(lo+blockRows, t.n)); err != nil {
				return err
			}
		}
		if err := x.Abort(); err != nil {
			return err
		}
	}
	return nil
}
