package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	defer warnWithdrawn(r.Log, co, fl.settle)
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

// warnWithdrawn tells the user of a worker whose claims were withdrawn
// because ClickHouse acknowledged their insert later than half the
// settle window (internal/workclaim). Each was left for a later pass, so
// a worker whose inserts are that slow all the time mostly waits between
// passes: on a loaded test machine two ingest workers took 49 s where one
// process took 2, with every source done in a later attempt. The flag is
// hidden, so this is where a user learns of it.
func warnWithdrawn(log *slog.Logger, co *workclaim.Coordinator, settle time.Duration) {
	n, slowest := co.Withdrawn()
	if n == 0 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	log.Warn("claims withdrawn: ClickHouse acknowledged their inserts later than half the settle window, and each was retried in a later pass; "+
		"if this recurs, give --claim-settle more than twice the slowest acknowledgement",
		"withdrawn", n, "slowest_ack", slowest.Round(time.Millisecond).String(), "claim_settle", settle.String())
}
