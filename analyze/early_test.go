package analyze

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

// hookAnalyzer is an analyzer made of a pass and a name, for tests of how
// Run drives passes.
type hookAnalyzer struct {
	name string
	p    func() pass
}

func (a *hookAnalyzer) Name() string  { return a.name }
func (*hookAnalyzer) Version() string { return "1" }
func (*hookAnalyzer) Params() any     { return nil }
func (a *hookAnalyzer) newPass() pass { return a.p() }
func (a *hookAnalyzer) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

// slicePassFunc is a pass that works in the slices only.
type slicePassFunc func(ctx context.Context, d *Dataset) ([]Finding, error)

func (f slicePassFunc) slice(ctx context.Context, d *Dataset) ([]Finding, error) { return f(ctx, d) }
func (slicePassFunc) finish(context.Context, *Dataset) ([]Finding, error)        { return nil, nil }

// TestEarlyPassRunsBesideTheSlices: an early pass (posture_regression's
// kind) is running while the first slice's passes run, its findings are
// recorded at its conclusion like any pass's, and a run that ends in an
// error returns only after the early pass has stopped.
func TestEarlyPassRunsBesideTheSlices(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t)
	w := Window{From: testNow.Add(-time.Hour), To: testNow.Add(time.Hour)}
	const patience = 20 * time.Second

	begun, release := make(chan struct{}), make(chan struct{})
	early := &hookAnalyzer{name: "test_early", p: func() pass {
		return &earlyPass{run: func(ctx context.Context, d *Dataset) ([]Finding, error) {
			if d.Window != w || d.Facts != nil {
				return nil, fmt.Errorf("early pass got window %s and %d facts, want %s and none", d.Window, len(d.Facts), w)
			}
			close(begun)
			select {
			case <-release:
				return []Finding{{Subject: "early", TS: testNow, Severity: Low, Title: "early"}}, nil
			case <-time.After(patience):
				return nil, errors.New("the slices never released the early pass")
			}
		}}
	}}
	slices := &hookAnalyzer{name: "test_slices", p: func() pass {
		return slicePassFunc(func(ctx context.Context, d *Dataset) ([]Finding, error) {
			select {
			case <-begun:
				close(release)
				return nil, nil
			case <-time.After(patience):
				return nil, errors.New("the early pass had not started when the slices ran")
			}
		})
	}}
	r := &Runner{DB: db, Cfg: DefaultConfig(), Analyzers: []Analyzer{slices, early}, Trigger: "test", SkipReconstruct: true}
	rep, err := r.Run(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Runs {
		if res.Run.Status == StatusError {
			t.Errorf("%s: %s", res.Run.Analyzer, res.Run.Error)
		}
	}
	if got := rep.Runs[1]; got.Run.Analyzer != "test_early" || got.Run.Findings != 1 || len(got.Findings) != 1 {
		t.Errorf("early run %+v with %d findings, want test_early with 1", got.Run, len(got.Findings))
	}

	// A run that fails (here its context is cancelled in the first slice)
	// cancels the early pass and waits for it.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopped atomic.Bool
	blocked := &hookAnalyzer{name: "test_early", p: func() pass {
		return &earlyPass{run: func(ctx context.Context, d *Dataset) ([]Finding, error) {
			defer stopped.Store(true)
			select {
			case <-ctx.Done():
				time.Sleep(100 * time.Millisecond) // a slow stop is still waited for
				return nil, ctx.Err()
			case <-time.After(patience):
				return nil, errors.New("not cancelled")
			}
		}}
	}}
	canceller := &hookAnalyzer{name: "test_slices", p: func() pass {
		return slicePassFunc(func(context.Context, *Dataset) ([]Finding, error) { cancel(); return nil, nil })
	}}
	r = &Runner{DB: db, Cfg: DefaultConfig(), Analyzers: []Analyzer{canceller, blocked}, Trigger: "test", SkipReconstruct: true}
	if _, err := r.Run(cctx, w, nil); err == nil {
		t.Fatal("a run whose context was cancelled succeeded")
	}
	if !stopped.Load() {
		t.Error("Run returned while its early pass was still running")
	}
}
