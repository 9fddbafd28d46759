package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/memlimit"
	"github.com/kvtrail/kvtrail/simulate"
)

// Phase is one step of the incident benchmark: its time and the process's
// peak resident memory during it.
type Phase struct {
	Name     string
	Duration time.Duration
	PeakRSS  uint64
	// PeakLive is the highest live heap a collection marked during the
	// phase. RSS follows the soft limit's governor (internal/memlimit: the
	// floor, or the live heap and its headroom), so below the floor it
	// shows the floor; the live heap shows what the phase held.
	PeakLive uint64
}

// IncidentResult is one run of the incident benchmark: an incident of a
// given size from simulation to the notification list, and that list
// against the simulator's truth.
type IncidentResult struct {
	Scale    float64
	Requests int
	Lines    uint64
	// Linked is how many requests the link saved to request_facts (the
	// link phase's, or the span analysis's with kvtrail ingest --analyze);
	// Adopted how many rows the analysis took as its own instead of saving
	// them again (analyze/adopt.go).
	Linked  int
	Adopted uint64
	// ReplayPasses is how many times the analysis replayed the allocator
	// over the window (one when its analyzers and reconstruction shared it).
	ReplayPasses int
	Phases       []Phase
	// AnalyzeSteps are the analysis's own steps (load and correlate, save
	// request_facts, each analyzer, the reconstruction), which add up to
	// most of the analyze phase; PeakRSS is not measured per step.
	AnalyzeSteps []Phase
	// DiskBytes is what ClickHouse stores for the database (active parts,
	// compressed).
	DiskBytes uint64
	// Received and exposed tenants: the list against the truth.
	Received        Agreement
	Exposed         Agreement
	ReceivedTruth   int
	ExposedTruth    int
	ReconstructedAt time.Time
}

// Agreement is a list compared with the truth.
type Agreement struct {
	Listed, Right, Missed, Extra int
}

// Recall is the share of the truth the list holds.
func (a Agreement) Recall() float64 {
	if a.Right+a.Missed == 0 {
		return 1
	}
	return float64(a.Right) / float64(a.Right+a.Missed)
}

// Precision is the share of the list that is true.
func (a Agreement) Precision() float64 {
	if a.Listed == 0 {
		return 1
	}
	return float64(a.Right) / float64(a.Listed)
}

// Exact reports whether the list equals the truth.
func (a Agreement) Exact() bool { return a.Missed == 0 && a.Extra == 0 }

// IncidentOptions configures the benchmark.
type IncidentOptions struct {
	Scenario string
	Scale    float64
	// PageSize overrides every simulated engine's page size in tokens (0:
	// the simulator's 64; 1 is SGLang's default).
	PageSize int
	// Days overrides the scenario's length (0: the scenario's own).
	Days int
	// Dir holds the simulated logs; empty means a temporary directory,
	// removed afterwards.
	Dir    string
	Ingest ingest.Options
	Cfg    analyze.Config
	// AnalyzeMemoryLimit is the soft memory limit (bytes) during the
	// analyze phase, as `kvtrail analyze` sets it (0: none), following the
	// live heap past it as there (internal/memlimit).
	AnalyzeMemoryLimit int64
	// IngestMemoryLimit is the one during the ingest phase, as `kvtrail
	// ingest` sets it (memory_limit; 0: none). The simulation runs
	// without one, at simulate.TightGC's GOGC.
	IngestMemoryLimit int64
	// Ingested says the store already holds the incident Dir's logs:
	// simulation and ingest are skipped (Dir still gives the truth), as
	// when a run is repeated on its kept database.
	Ingested bool
	// Simulated says Dir already holds a simulation an earlier run wrote
	// there (its logs, sources.yaml and truth.json): it is ingested and
	// analyzed without simulating again. At a page size of one token the
	// simulation of a 10M-request incident takes most of an hour, longer
	// than the ingest and analysis it feeds.
	Simulated bool
	// NoAdopt has the analysis save every request it links even where the
	// link saved the same rows (analyze.Runner.NoAdopt): the comparison.
	NoAdopt bool
	// TwoCommands measures `kvtrail ingest` then `kvtrail analyze`: a link
	// of the ingested span after the lines (its own phase), then an
	// analysis of all the data, which links every request again and takes
	// the link's rows. By default the bench measures `kvtrail ingest
	// --analyze`, whose analysis of the span is its only link.
	TwoCommands bool
}

// DiskStore is what the incident benchmark needs beyond analysis.
type DiskStore interface {
	AnalyzeStore
	ingest.Store
	DiskBytes(ctx context.Context) (uint64, error)
}

// Incident simulates an incident to disk, ingests it, analyzes the
// ingested span (as `kvtrail ingest --analyze` does; with TwoCommands,
// links the span and then analyzes all the data, as `kvtrail ingest` then
// `kvtrail analyze` do) and reads the notification list, timing each phase
// with its peak RSS, then compares the list with the simulator's truth.
func Incident(ctx context.Context, s DiskStore, o IncidentOptions) (IncidentResult, error) {
	res := IncidentResult{Scale: o.Scale}
	dir := o.Dir
	if (o.Ingested || o.Simulated) && dir == "" {
		return res, fmt.Errorf("an incident simulated before needs the directory it was simulated to (its truth.json)")
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "kvtrail-bench-incident-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	phase := func(name string, f func() error) error {
		// What an earlier phase freed goes back to the OS first, so a
		// phase's peak is its own, not the heap the last one left. Twice:
		// what an earlier phase left in a sync.Pool (the replay's page
		// records, megabytes a lane at a page size of one token) outlives
		// one collection, and would count as this phase's live heap.
		debug.FreeOSMemory()
		debug.FreeOSMemory()
		ResetPeakRSS()
		live := sampleLiveHeap()
		t0 := time.Now()
		err := f()
		res.Phases = append(res.Phases, Phase{Name: name, Duration: time.Since(t0), PeakRSS: PeakRSS(), PeakLive: live()})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	var truth incidentTruth
	if o.Ingested {
		var err error
		if truth, err = loadIncidentTruth(filepath.Join(dir, "truth.json")); err != nil {
			return res, err
		}
		res.Requests = truth.requests
		err = analyzeAndList(ctx, s, o, truth, &res, phase, wholeData(ctx))
		return res, err
	}
	if o.Simulated {
		var err error
		if truth, err = loadIncidentTruth(filepath.Join(dir, "truth.json")); err != nil {
			return res, err
		}
	} else if err := phase("simulate", func() error {
		defer simulate.TightGC()()
		if _, err := simulate.Run(ctx, simulate.Config{Scenario: o.Scenario, Seed: 1, Scale: o.Scale, Days: o.Days, PageSize: o.PageSize, OutDir: dir}); err != nil {
			return err
		}
		var err error
		truth, err = loadIncidentTruth(filepath.Join(dir, "truth.json"))
		return err
	}); err != nil {
		return res, err
	}
	res.Requests = truth.requests
	if err := phase("ingest", func() error {
		if o.IngestMemoryLimit > 0 {
			defer memlimit.Start(o.IngestMemoryLimit).Stop()
		}
		sources, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
		if err != nil {
			return err
		}
		sum, err := ingest.New(s, o.Ingest).Ingest(ctx, sources)
		if err != nil {
			return err
		}
		res.Lines = sum.Total.Records
		return nil
	}); err != nil {
		return res, err
	}
	if !o.TwoCommands {
		// kvtrail ingest --analyze: the pending span analyzed, which links it.
		err := analyzeAndList(ctx, s, o, truth, &res, phase, func(r *analyze.Runner) (*analyze.Report, error) {
			sp, pending, err := ingest.PendingCorrelation(ctx, s)
			if err != nil {
				return nil, err
			}
			if !pending {
				return nil, fmt.Errorf("no ingested span left to analyze")
			}
			an := &analyze.SpanAnalysis{Runner: r}
			_, res.Linked, err = ingest.LinkSpan(ctx, s, an, sp, o.Cfg.LinkMargin)
			return an.Report, err
		})
		return res, err
	}
	// What `kvtrail ingest` does after its lines unless told not to: link
	// the ingested span's requests into request_facts, with the analysis's
	// slices and memory limit. The analysis links its window again (it
	// needs the requests in memory), so this phase is the cost of the
	// two-command path, reported apart.
	if err := phase("link", func() error {
		if o.AnalyzeMemoryLimit > 0 {
			defer memlimit.Start(o.AnalyzeMemoryLimit).Stop()
		}
		sp, pending, err := ingest.PendingCorrelation(ctx, s)
		if err != nil || !pending {
			return err
		}
		r := &analyze.Runner{DB: s, Cfg: o.Cfg, Trigger: "bench"}
		_, res.Linked, err = ingest.LinkSpan(ctx, s, r, sp, o.Cfg.LinkMargin)
		return err
	}); err != nil {
		return res, err
	}
	err := analyzeAndList(ctx, s, o, truth, &res, phase, wholeData(ctx))
	return res, err
}

// wholeData runs an analysis as `kvtrail analyze` does with no window.
func wholeData(ctx context.Context) func(*analyze.Runner) (*analyze.Report, error) {
	return func(r *analyze.Runner) (*analyze.Report, error) { return r.Run(ctx, analyze.Window{}, nil) }
}

// analyzeAndList is the incident benchmark's analyze and notification-list
// phases and the list against the truth; run runs the analysis.
func analyzeAndList(ctx context.Context, s DiskStore, o IncidentOptions, truth incidentTruth, res *IncidentResult,
	phase func(string, func() error) error, run func(*analyze.Runner) (*analyze.Report, error)) error {
	if err := phase("analyze", func() error {
		if o.AnalyzeMemoryLimit > 0 {
			// As kvtrail analyze: a limit that follows the live heap.
			defer memlimit.Start(o.AnalyzeMemoryLimit).Stop()
		}
		r := &analyze.Runner{DB: s, Cfg: o.Cfg, Trigger: "bench", Lean: true, NoAdopt: o.NoAdopt}
		rep, err := run(r)
		if err == nil && rep.Errors() {
			err = fmt.Errorf("an analyzer failed")
		}
		if rep != nil {
			res.Adopted = rep.Adopted
			res.ReplayPasses = rep.ReplayPasses
			for _, p := range rep.Phases {
				res.AnalyzeSteps = append(res.AnalyzeSteps, Phase{Name: p.Name, Duration: p.Duration})
			}
		}
		return err
	}); err != nil {
		return err
	}
	var rec *analyze.Reconstruction
	if err := phase("notification list", func() error {
		var err error
		rec, err = analyze.LatestAffected(ctx, s)
		return err
	}); err != nil {
		return err
	}
	res.ReconstructedAt = rec.Created
	listed := map[domain.Role][]string{}
	for _, r := range rec.Rows {
		if !slices.Contains(listed[r.Role], r.Tenant) {
			listed[r.Role] = append(listed[r.Role], r.Tenant)
		}
	}
	res.Received = agree(listed[domain.Received], truth.received)
	res.Exposed = agree(listed[domain.Exposed], truth.exposed)
	res.ReceivedTruth, res.ExposedTruth = len(truth.received), len(truth.exposed)
	var err error
	if res.DiskBytes, err = s.DiskBytes(ctx); err != nil {
		return fmt.Errorf("disk bytes: %w", err)
	}
	return nil
}

// incidentTruth is what the benchmark keeps of the simulator's truth: the
// whole of it (every affected request) is 240 MB at scale 100, and held
// through the analysis it would count as the analysis' memory.
type incidentTruth struct {
	requests          int
	received, exposed []string
}

func loadIncidentTruth(path string) (incidentTruth, error) {
	t, err := simulate.LoadTruth(path)
	if err != nil {
		return incidentTruth{}, err
	}
	return incidentTruth{requests: t.Requests, received: t.ReceivedForeignData, exposed: t.PossiblyExposed}, nil
}

func agree(list, truth []string) Agreement {
	a := Agreement{Listed: len(list)}
	for _, t := range list {
		if slices.Contains(truth, t) {
			a.Right++
		} else {
			a.Extra++
		}
	}
	a.Missed = len(truth) - a.Right
	return a
}

// sampleLiveHeap reads the live heap every 20 ms (the figure moves only when
// a collection ends) until the returned func is called, which returns the
// highest value read.
func sampleLiveHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	done, out := make(chan struct{}), make(chan uint64)
	go func() {
		peak := read()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- max(peak, read())
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-out
	}
}

// ResetPeakRSS starts a new peak for PeakRSS (Linux: writing 5 to
// /proc/self/clear_refs resets VmHWM), so each phase reports its own peak.
// Where that is not possible the peak stays the process's.
func ResetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
