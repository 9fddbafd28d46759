package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"syscall"
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
	// Replay is the allocator replay's cost: the whole analysis timed
	// again with and without it, alternately, on the same data.
	Replay ReplayCost
}

// ReplayCost holds whole-analysis times (load, analyzers, reconstruction,
// with their writes) with the allocator replay and without it
// (analyze.Config.SkipReplay: every victim falls back to its node/rank
// window), measured alternately in one run so that load on the machine
// and ClickHouse's caches weigh on both alike.
type ReplayCost struct {
	With, Without []time.Duration
	// WithCPU and WithoutCPU are the CPU time kvtrail's own process spent
	// (user + system, all threads, garbage collection included) in the
	// same analyses: on a shared machine, steadier than wall time.
	// ClickHouse's side, the same queries in both but one, is not in it.
	WithCPU, WithoutCPU []time.Duration
}

// CPURatio is median(WithCPU) / median(WithoutCPU).
func (c ReplayCost) CPURatio() float64 {
	w, wo := median(c.WithCPU), median(c.WithoutCPU)
	if wo <= 0 {
		return 0
	}
	return float64(w) / float64(wo)
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Ratio is median(with) / median(without): 1.2 means the replay adds 20 %.
func (c ReplayCost) Ratio() float64 {
	w, wo := median(c.With), median(c.Without)
	if wo <= 0 {
		return 0
	}
	return float64(w) / float64(wo)
}

// Median returns the median times (with, without).
func (c ReplayCost) Median() (with, without time.Duration) {
	return median(c.With), median(c.Without)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// replayPairs is how many (without, with) pairs of whole analyses measure
// the replay's cost after the first, timed-by-phase run (which warms the
// caches and is not counted).
const replayPairs = 3

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
		res.Analyzers = append(res.Analyzers, Timed{Name: run.Run.Analyzer, Duration: run.Duration, Rows: uint64(run.Run.Findings)})
	}
	for _, p := range rep.Phases {
		switch {
		case p.Name == "load+correlate" || p.Name == "save request_facts" || p.Name == "completeness gaps":
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
	if err != nil {
		return res, err
	}
	// The replay's cost, last: these analyses add request_facts versions
	// (counted above before they exist).
	for i := 0; i < 2*replayPairs; i++ {
		c := cfg
		c.SkipReplay = i%2 == 0
		rr := &analyze.Runner{DB: s, Cfg: c, Analyzers: analyze.All(c), Trigger: "bench"}
		runtime.GC() // each analysis starts from a collected heap
		t0, c0 := time.Now(), processCPU()
		x, err := rr.Run(ctx, rep.Window, nil)
		wall, cpu := time.Since(t0), processCPU()-c0
		if err != nil {
			return res, fmt.Errorf("analyze (skip replay %v): %w", c.SkipReplay, err)
		}
		if x.Errors() {
			return res, fmt.Errorf("an analyzer failed (skip replay %v)", c.SkipReplay)
		}
		if c.SkipReplay {
			res.Replay.Without = append(res.Replay.Without, wall)
			res.Replay.WithoutCPU = append(res.Replay.WithoutCPU, cpu)
		} else {
			res.Replay.With = append(res.Replay.With, wall)
			res.Replay.WithCPU = append(res.Replay.WithCPU, cpu)
		}
	}

	return res, nil
}
