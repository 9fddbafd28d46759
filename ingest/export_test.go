package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// MetricBlock is the client's share of writing n Prometheus samples (17
// series on one node, as a simulated .prom file has): for each table it
// writes, open opens an INSERT and fill builds the rows' columns and
// appends them. For BenchmarkMetricColumns, which times fill alone.
func MetricBlock(n int) (tables []string, open func(context.Context, Store) ([]TableWriter, error), fill func([]TableWriter) error) {
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
	// Rebuilt at each fill, as the writer builds them per batch.
	return writeBlock(func() []tableWrite {
		var list []tableWrite
		_, _, typed := tableWrites(&b, base, nil, nil)
		for _, t := range typed {
			if t.n > 0 {
				list = append(list, t)
			}
		}
		return list
	})
}

// RawBlock is MetricBlock for n raw_lines rows of one file source (the
// path and stream digest as long as a simulated incident's), for
// BenchmarkRawColumns.
func RawBlock(n int) (tables []string, open func(context.Context, Store) ([]TableWriter, error), fill func([]TableWriter) error) {
	var b Batch
	base := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	const path, digest = "/data/incident/logs/decode-0.log", "0f3c5a9e2b7d41c8a6e09f1b3d5c7e9a0f3c5a9e2b7d41c8a6e09f1b3d5c7e9a"
	line := "[2026-07-04 00:00:00 DP0 TP0] Decode batch, #running-req: 12, #token: 48211, token usage: 0.07, gen throughput (token/s): 811.5, #queue-req: 0"
	for i := 0; i < n; i++ {
		b.raw = append(b.raw, rawRow{ts: base.Add(time.Duration(i) * time.Millisecond), node: "decode-0", role: "decode", format: "sglang",
			source: path, digest: digest, ref: SourceRef("decode-0", path, digest), offset: uint64(i * 150), lineNo: uint64(i + 1),
			lineID: LineID(digest, int64(i*150)), kind: "batch", status: "parsed", line: line})
	}
	// Rebuilt at each fill, as the writer builds them per batch (with a
	// nil seen set the source row is built every time, as for the first
	// batch of a source).
	return writeBlock(func() []tableWrite {
		src, raw, _ := tableWrites(&b, base, nil, nil)
		return []tableWrite{src, raw}
	})
}

// writeBlock is a block's tables, an opener of one INSERT per table, and
// a filler that builds the writes anew (build) and appends their columns.
func writeBlock(build func() []tableWrite) (tables []string, open func(context.Context, Store) ([]TableWriter, error), fill func([]TableWriter) error) {
	list := build()
	for _, t := range list {
		tables = append(tables, t.name)
	}
	open = func(ctx context.Context, s Store) ([]TableWriter, error) {
		var xs []TableWriter
		for _, t := range list {
			x, err := s.OpenInsert(ctx, t.name, t.cols)
			if err != nil {
				return nil, err
			}
			xs = append(xs, x)
		}
		return xs, nil
	}
	fill = func(xs []TableWriter) error {
		for j, t := range build() {
			for lo := 0; lo < t.n; lo += blockRows {
				if err := t.fill(xs[j], lo, min(lo+blockRows, t.n)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return tables, open, fill
}

// CandidateCache is the run's checkpoint lookup cache (candidates.go),
// for TestCandidateCache….
type CandidateCache = candidateCache

// NewCandidateCache returns the cache a run would use over s.
func NewCandidateCache(s Store) *CandidateCache { return newCandidateCache(s) }

// Lookup is identify's lookup for a file whose content starts with head.
func (c *candidateCache) Lookup(ctx context.Context, node string, head []byte) ([]Checkpoint, error) {
	return c.lookup(ctx, node, uint32(len(head)), hexSum(head))
}

// Saved is what the flusher tells the cache once a commit's checkpoints
// are saved.
func (c *candidateCache) Saved(cps []Checkpoint) { c.saved(cps) }
