package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/internal/workclaim"
)

// analysisClaims adapts a workclaim.Coordinator to analyze.Claims.
type analysisClaims struct{ c *workclaim.Coordinator }

func (a analysisClaims) Claim(ctx context.Context, job, unit string) (analyze.Lease, error) {
	h, err := a.c.Claim(ctx, job, unit)
	if h == nil {
		return nil, err // not a typed nil in the interface
	}
	return h, err
}

func (a analysisClaims) Remaining(ctx context.Context, job string, units []string) ([]string, error) {
	return a.c.Remaining(ctx, job, units)
}

// analyzeWorkerFlags are `kvtrail analyze`'s flags for analysis workers.
type analyzeWorkerFlags struct {
	worker, job   string
	newJob        bool
	lease, settle time.Duration
}

// runAnalyzeWorker takes part in a shared analysis job.
func runAnalyzeWorker(ctx context.Context, w io.Writer, r *analyze.Runner, s analysisStore, win analyze.Window, names []string, fl analyzeWorkerFlags) error {
	co := &workclaim.Coordinator{Store: s, Worker: fl.worker, Lease: fl.lease, Settle: fl.settle}
	lease := fl.lease
	if lease <= 0 {
		lease = workclaim.DefaultLease
	}
	wr, err := r.RunWorker(ctx, win, names, analyze.Job{ID: fl.job, Worker: fl.worker, Lease: lease}, analysisClaims{co}, s)
	if wr != nil {
		fmt.Fprintf(w, "worker %s: %d of %d slices of %s\n", fl.worker, wr.Done, wr.Slices, fl.job)
		if wr.Report != nil {
			fmt.Fprintf(w, "this worker concluded the job:\n\n")
			printReport(w, wr.Report)
		} else if err == nil {
			fmt.Fprintf(w, "another worker concludes the job\n")
		}
	}
	if err != nil {
		return err
	}
	if wr.Report != nil && wr.Report.Errors() {
		return fmt.Errorf("one or more analyzers failed (see ERROR above)")
	}
	return nil
}

// analysisStore is what an analysis worker needs of the store.
type analysisStore interface {
	analyze.Store
	analyze.JobStore
	workclaim.Store
}
