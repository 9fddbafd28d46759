package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/analyze"
)

// AnalyzeStore is what the analyze benchmark needs from ClickHouse.
type AnalyzeStore interface {
	analyze.DB
	QueryRow(ctx context.Context, sql string, args ...any) driver.Row
}

// Timed is one measured step.
type Timed struct {
	Name     string
	Duration time.Duration
	// Rows is what the step returned or scanned, when known.
	Rows uint64
}

// AnalyzeResult is one run of the analyze benchmark.
type AnalyzeResult struct {
	Window   analyze.Window
	Requests int
	// Tenants is the number of rows of the affected list it built.
	Tenants   int
	Load      time.Duration
	Analyzers []Timed
	Reconstr  time.Duration
	// Scans are the baseline: one count() per table with the analyzers'
	// filters, i.e. what ClickHouse needs to read the data once.
	Scans []Timed
}

// Total is load + analyzers + reconstruction.
func (r AnalyzeResult) Total() time.Duration {
	t := r.Load + r.Reconstr
	for _, a := range r.Analyzers {
		t += a.Duration
	}
	return t
}

// ScanTotal is the baseline's total.
func (r AnalyzeResult) ScanTotal() time.Duration {
	var t time.Duration
	for _, s := range r.Scans {
		t += s.Duration
	}
	return t
}

// baselineScans are the tables a run reads, with the same time filters.
var baselineScans = []struct{ name, sql string }{
	{"gateway_responses", "SELECT count() FROM gateway_responses WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)"},
	{"engine_events", "SELECT count() FROM engine_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND event != 'http_access'"},
	{"transfer_events", "SELECT count() FROM transfer_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)"},
	{"page_events", "SELECT count() FROM page_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)"},
	{"raw_lines (per-minute completeness)", "SELECT count() FROM raw_lines WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)"},
	{"node_boots", "SELECT count() FROM node_boots WHERE boot_ts <= toDateTime(?) OR boot_ts >= toDateTime(?)"},
}

// Analyze runs every analyzer once over w exactly as `kvtrail analyze`
// does (load, save request facts, each analyzer with its findings saved,
// the affected reconstruction), timing each phase, then times one count()
// scan of each table the run reads with the same filters.
func Analyze(ctx context.Context, s AnalyzeStore, cfg analyze.Config, w analyze.Window) (AnalyzeResult, error) {
	res := AnalyzeResult{}
	r := &analyze.Runner{DB: s, Cfg: cfg, Analyzers: analyze.All(cfg), Trigger: "bench"}
	rep, err := r.Run(ctx, w, nil)
	if err != nil {
		return res, fmt.Errorf("analyze: %w", err)
	}
	if rep.Errors() {
		return res, fmt.Errorf("an analyzer failed")
	}
	res.Window = rep.Window
	for _, run := range rep.Runs {
		res.Analyzers = append(res.Analyzers, Timed{Name: run.Run.Analyzer, Duration: run.Duration, Rows: uint64(len(run.Findings))})
	}
	for _, p := range rep.Phases {
		switch {
		case p.Name == "load+correlate" || p.Name == "save request_facts":
			res.Load += p.Duration
		case p.Name == "reconstruct affected":
			res.Reconstr = p.Duration
		}
	}
	if rep.Reconstruction != nil {
		res.Tenants = len(rep.Reconstruction.Rows)
	}
	d := rep

	from, to := uint32(d.Window.From.Unix()), uint32(d.Window.To.Unix())
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM request_facts").Scan(&n); err == nil {
		res.Requests = int(n)
	}
	for _, sc := range baselineScans {
		t0 := time.Now()
		if err := s.QueryRow(ctx, sc.sql, from, to).Scan(&n); err != nil {
			return res, fmt.Errorf("scan %s: %w", sc.name, err)
		}
		res.Scans = append(res.Scans, Timed{Name: sc.name, Duration: time.Since(t0), Rows: n})
	}
	return res, nil
}
