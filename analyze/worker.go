package analyze

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Analysis workers. Several `kvtrail analyze --worker` processes, on one
// machine or many, share one job: the slices of a window (slices.go). Each
// worker plans the same slices from the same data, claims slices through
// ClickHouse (Claims), links and saves each claimed slice's requests and
// writes what every analyzer made of it — findings and the sums its pass
// carries — in one INSERT (analysis_slices). A worker that dies leaves its
// slice claimed until the lease runs out; another takes it over. When no
// slice is left, one worker wins the job's "finish" unit, reads the
// slices' results back in slice order and concludes exactly as a single
// process reading the window in slices would (TestWorkersEqualSingleRun).

// Claims splits a job's units among workers (internal/workclaim).
type Claims interface {
	// Claim returns a lease on unit, or nil when another worker holds it
	// or it is done.
	Claim(ctx context.Context, job, unit string) (Lease, error)
	// Remaining returns the units not done yet.
	Remaining(ctx context.Context, job string, units []string) ([]string, error)
}

// Lease is a claimed unit.
type Lease interface {
	Renew(ctx context.Context) error
	Done(ctx context.Context) error
}

// SliceStore is where workers leave slice results for the finisher.
type SliceStore interface {
	SaveSliceResults(ctx context.Context, rows []domain.SliceResult) error
	SliceResults(ctx context.Context, job string, fn func(domain.SliceResult) error) error
}

// Job is one analysis shared by workers. Its id carries the request_facts
// version all of them write (NewJob), so what they save is one build.
type Job struct {
	ID     string
	Worker string
	// Lease is how long a claim lasts without renewal (renewed at a third
	// of it while a slice runs); Poll is how often a worker with nothing
	// to claim looks again.
	Lease, Poll time.Duration
}

// NewJobID names a new job; the time in it is the version of the request
// facts its workers save (a later job's replace an earlier one's).
func NewJobID(now time.Time) string { return fmt.Sprintf("analysis-%d", now.UnixNano()) }

func jobVersion(id string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(id, "analysis-"), 10, 64)
	if err != nil || !strings.HasPrefix(id, "analysis-") || v == 0 {
		return 0, fmt.Errorf("job id %q: want analysis-<nanoseconds> (kvtrail analyze --new-job prints one)", id)
	}
	return v, nil
}

// carrier is a pass whose slices carry state to the window's end: state
// encodes what a pass saw in one slice; absorb adds a slice's state to
// the finishing pass, in slice order.
type carrier interface {
	state() (string, error)
	absorb(ctx context.Context, wd *Dataset, state string) error
}

// WorkerReport is what one worker did; Report is set on the worker that
// finished the job.
type WorkerReport struct {
	Slices, Done int
	Report       *Report
}

// RunWorker takes part in job over w: it analyzes the slices it can claim,
// then, if it is the one to finish, concludes the job.
func (r *Runner) RunWorker(ctx context.Context, w Window, names []string, job Job, claims Claims, out JobStore) (*WorkerReport, error) {
	version, err := jobVersion(job.ID)
	if err != nil {
		return nil, err
	}
	if job.Lease <= 0 {
		job.Lease = time.Minute
	}
	if job.Poll <= 0 {
		job.Poll = job.Lease / 4
	}
	analyzers := r.Analyzers
	if analyzers == nil {
		analyzers = All(r.Cfg)
	}
	sel, err := Select(analyzers, names)
	if err != nil {
		return nil, err
	}
	started := time.Unix(0, int64(version)).UTC()
	wd, err := r.prepare(ctx, w, true)
	if err != nil {
		return nil, err
	}
	if wd.Gaps, err = r.gaps(ctx, wd); err != nil {
		return nil, err
	}
	wd.factsVersion = version
	plan, err := r.plan(ctx, wd)
	if err != nil {
		return nil, err
	}
	units := make([]string, len(plan))
	for i := range plan {
		units[i] = fmt.Sprintf("slice-%06d", i)
	}
	wr := &WorkerReport{Slices: len(plan)}
	for {
		for i, own := range plan {
			lease, err := claims.Claim(ctx, job.ID, units[i])
			if err != nil {
				return wr, err
			}
			if lease == nil {
				continue
			}
			if err := r.workSlice(ctx, wd, sel, own, uint32(i), job, lease, out); err != nil {
				return wr, fmt.Errorf("slice %d of %s: %w", i, job.ID, err)
			}
			wr.Done++
		}
		left, err := claims.Remaining(ctx, job.ID, units)
		if err != nil {
			return wr, err
		}
		if len(left) == 0 {
			break
		}
		if err := sleep(ctx, job.Poll); err != nil {
			return wr, err
		}
	}
	jr := &jobReplay{r: r, d: wd, job: job, claims: claims, store: out}
	lease, err := claims.Claim(ctx, job.ID, "finish")
	if err != nil {
		return wr, err
	}
	if lease == nil {
		// Another worker concludes: replay nodes for it until the job is
		// finished, or conclude when it dies.
		if lease, err = jr.help(ctx); err != nil || lease == nil {
			return wr, err
		}
	}
	stop := renewing(ctx, lease, job.Lease, r.Log)
	wd.replayer = jr.run
	rep, err := r.finishJob(ctx, wd, sel, job, len(plan), started, out)
	stop()
	if err != nil {
		return wr, err
	}
	wr.Report = rep
	rep.Slices = len(plan)
	return wr, lease.Done(ctx)
}

// workSlice links and saves one slice and records each analyzer's part.
func (r *Runner) workSlice(ctx context.Context, wd *Dataset, sel []Analyzer, own Window, idx uint32, job Job, lease Lease, out SliceStore) error {
	stop := renewing(ctx, lease, job.Lease, r.Log)
	defer stop()
	d, err := r.loadSlice(ctx, wd, own, false)
	if err != nil {
		return err
	}
	// What the slice saved of gateway-logged requests, as a link records
	// it: the finisher adds the slices' up into the job's link.
	var part domain.FactLink
	if err := r.DB.RequestFactsInsert(d.Facts, wd.factsVersion, &part.Digest)(ctx); err != nil {
		return err
	}
	sawLogged(&part, d.Facts)
	b, err := json.Marshal(part)
	if err != nil {
		return err
	}
	rows := make([]domain.SliceResult, 0, len(sel)+1)
	rows = append(rows, domain.SliceResult{Job: job.ID, Slice: idx, Worker: job.Worker, Analyzer: factsResult, State: string(b)})
	for _, a := range sel {
		row := domain.SliceResult{Job: job.ID, Slice: idx, Worker: job.Worker, Analyzer: a.Name()}
		p := passOf(a)
		fs, err := p.slice(ctx, d)
		if err == nil {
			fs = ownFindings(d, fs)
			var b []byte
			if b, err = json.Marshal(fs); err == nil {
				row.Findings = string(b)
			}
		}
		if c, ok := p.(carrier); ok && err == nil {
			row.State, err = c.state()
		}
		if err != nil {
			row.Error = err.Error()
		}
		rows = append(rows, row)
	}
	if err := out.SaveSliceResults(ctx, rows); err != nil {
		return err
	}
	return lease.Done(ctx)
}

// factsResult names a slice's row in analysis_slices that is no
// analyzer's: what the slice saved to request_facts, its part of the
// job's link (a domain.FactLink holding the digest and time span).
const factsResult = "request_facts"

// ownFindings keeps the findings a slice owns.
func ownFindings(d *Dataset, fs []Finding) []Finding {
	out := fs[:0]
	for _, f := range fs {
		if d.owns(f.TS) {
			out = append(out, f)
		}
	}
	return out
}

// finishJob reads every slice's results (one worker's per slice) in slice
// order, records what the slices saved to request_facts as one link (so
// that the next analysis of the window adopts the rows, as it does a
// single process's: adopt.go) and concludes.
func (r *Runner) finishJob(ctx context.Context, wd *Dataset, sel []Analyzer, job Job, slices int, started time.Time, src SliceStore) (*Report, error) {
	rep := &Report{Window: wd.Window}
	passes := make([]pass, len(sel))
	found := make([]findingSpill, len(sel))
	defer closeFound(found)
	failed := make([]error, len(sel))
	took := make([]time.Duration, len(sel))
	index := map[string]int{}
	for i, a := range sel {
		passes[i] = passOf(a)
		index[a.Name()] = i
	}
	var (
		cur    = int64(-1)
		worker string
		// The job's link: every slice's rows, saved at the job's version.
		link      = domain.FactLink{Version: wd.factsVersion, From: wd.Window.From, To: wd.Window.To, LinkedAt: started}
		withFacts int
	)
	t0 := time.Now()
	err := src.SliceResults(ctx, job.ID, func(row domain.SliceResult) error {
		if int64(row.Slice) != cur {
			cur, worker = int64(row.Slice), row.Worker // a redone slice: the first worker's rows
		}
		if row.Analyzer == factsResult {
			if row.Worker == worker {
				var part domain.FactLink
				if err := json.Unmarshal([]byte(row.State), &part); err != nil {
					return fmt.Errorf("slice %d, %s: %w", row.Slice, row.Analyzer, err)
				}
				link.Join(part)
				withFacts++
			}
			return nil
		}
		i, ok := index[row.Analyzer]
		if row.Worker != worker || !ok || failed[i] != nil {
			return nil
		}
		if row.Error != "" {
			failed[i] = errors.New(row.Error)
			return nil
		}
		var fs []Finding
		if err := json.Unmarshal([]byte(row.Findings), &fs); err != nil {
			return fmt.Errorf("slice %d, %s: %w", row.Slice, row.Analyzer, err)
		}
		if err := found[i].add(fs); err != nil {
			return err
		}
		if c, ok := passes[i].(carrier); ok && row.State != "" {
			if err := c.absorb(ctx, wd, row.State); err != nil {
				failed[i] = err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Recorded only when every slice said what it saved (a worker of an
	// older build does not). A slice done twice (its first worker died
	// after saving) saved the same rows twice at the job's version: until
	// the table merges them, the adoption proof counts more rows than the
	// digest and the next analysis saves its own.
	if withFacts == slices {
		if err := r.DB.SaveFactLink(ctx, link); err != nil {
			return nil, err
		}
	}
	// The requests the slices' victim findings name, as a single process
	// keeps them (Dataset.keep): linking those of every finding linked
	// every abort_reuse lead's request again.
	var keys []string
	for i := range found {
		err := found[i].each(streamBatch, func(fs []Finding) error {
			for j := range fs {
				if f := &fs[j]; marksVictim(sel[i].Name(), f) {
					keys = append(keys, f.RequestKey)
					keys = append(keys, f.ForeignRequestKeys...)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := wd.ensureRequests(ctx, keys, nil); err != nil {
		return nil, err
	}
	rep.Phases = append(rep.Phases, Phase{"read slice results", time.Since(t0)})
	return rep, r.conclude(ctx, wd, sel, passes, found, failed, took, started, rep)
}

// renewing renews lease every third of its length until stop is called.
func renewing(ctx context.Context, lease Lease, every time.Duration, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := lease.Renew(ctx); err != nil && log != nil && ctx.Err() == nil {
					log.Warn("renew analysis lease", slog.Any("err", err))
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
