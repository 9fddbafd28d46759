package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

// AnalyzeStore is what the analyze benchmark needs from ClickHouse
// (*chstore.Store, which holds the statements).
type AnalyzeStore interface {
	analyze.Store
	CountRequestFacts(ctx context.Context) (uint64, error)
	BenchAnalysisScans(ctx context.Context, from, to time.Time) ([]chstore.BenchScan, error)
}

var _ AnalyzeStore = (*chstore.Store)(nil)

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
	// Scans are the baseline: every column the analysis reads, with its
	// filters, streamed and discarded, i.e. reading the data once.
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

// Analyze runs every analyzer once over w exactly as `kvtrail analyze`
// does (load, save request facts, each analyzer with its findings saved,
// the affected reconstruction), timing each phase, then times one
// streamed read of the columns the run reads with the same filters.
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

	if n, err := s.CountRequestFacts(ctx); err == nil {
		res.Requests = int(n)
	}
	// The baseline: every column the analysis reads, with its filters,
	// streamed to the client and discarded.
	scans, err := s.BenchAnalysisScans(ctx, d.Window.From, d.Window.To)
	for _, sc := range scans {
		res.Scans = append(res.Scans, Timed{Name: sc.Name, Duration: sc.Duration, Rows: sc.Rows})
	}
	return res, err
}
