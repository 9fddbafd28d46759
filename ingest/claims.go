package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Claims lets several ingest processes, maybe on different machines, split
// one set of sources (internal/workclaim through ClickHouse, wired by
// cmd/kvtrail). A source is claimed before it is read, its claim renewed
// while it runs and marked done once its final checkpoint is committed; a
// crashed worker's source is claimed again after its lease and resumes
// from its checkpoint. The claims only split the work: ingest stays
// idempotent (same line ids whoever writes them), so a source two workers
// end up writing (a holder stalled past its lease) is stored once.
type Claims interface {
	// Claim takes unit of job for this worker: nil, nil when another
	// worker holds it or it is done.
	Claim(ctx context.Context, job, unit string) (ClaimHeld, error)
	// Remaining are the units of job not done, in the order given.
	Remaining(ctx context.Context, job string, units []string) ([]string, error)
	// Lease is how long a claim holds without renewal.
	Lease() time.Duration
	// Worker names this worker among the job's. Each worker takes the
	// sources in an order of its own (claimOrder), so that workers do not
	// race for the same source one after another.
	Worker() string
}

// ClaimHeld is a claimed source.
type ClaimHeld interface {
	// Renew extends the lease; an error wrapping ErrClaimLost when
	// another worker took the source over.
	Renew(ctx context.Context) error
	Done(ctx context.Context) error
	Release(ctx context.Context) error
}

// ErrClaimLost is what a Claims implementation's Renew wraps when the
// source was taken over: the holder goes on (its writes are idempotent) but
// stops renewing.
var ErrClaimLost = errors.New("claim taken over by another worker")

// stateElsewhere is a source another worker holds: this worker looks at it
// again until it is complete.
const stateElsewhere = "elsewhere"

// ClaimJob names a set of sources for the claims: the same whatever the
// order they are listed in, so workers given the same manifest or paths
// share one job.
func ClaimJob(sources []Source) string {
	keys := make([]string, 0, len(sources))
	for _, s := range sources {
		keys = append(keys, s.Node+"\x00"+s.Path)
	}
	sort.Strings(keys)
	h := sha256.New()
	_, _ = h.Write([]byte("kvtrail-ingest-job"))
	prev := ""
	for _, k := range keys {
		if k == prev {
			continue
		}
		prev = k
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(k))
	}
	return "ingest/" + hex.EncodeToString(h.Sum(nil))[:32]
}

// claimUnit is a source's unit: its source id (node + path + stream) and
// its size. The size is part of it so that a file that grew is a new unit
// (its done claim was for fewer bytes), which a later run ingests from the
// checkpoint like any growing file.
func claimUnit(sourceKey string, size int64) string {
	return fmt.Sprintf("%s/%d", sourceKey, size)
}

// claimOrder is the order in which worker takes sources: by a hash of the
// worker's name and the source, a shuffle of its own. Given the same
// list, workers that all took it in list order raced for each source in
// turn: every source cost each of them a claim and its settle window
// (internal/workclaim), and only one got it. Shuffled apart, they meet
// only where their orders cross, mostly near the end.
func claimOrder(worker string, sources []Source) []int {
	type keyed struct {
		i int
		h uint64
	}
	ks := make([]keyed, len(sources))
	for i, s := range sources {
		f := fnv.New64a()
		_, _ = f.Write([]byte(worker))
		_, _ = f.Write([]byte{0})
		_, _ = f.Write([]byte(s.Node))
		_, _ = f.Write([]byte{0})
		_, _ = f.Write([]byte(s.Path))
		ks[i] = keyed{i, f.Sum64()}
	}
	sort.SliceStable(ks, func(a, b int) bool { return ks[a].h < ks[b].h })
	out := make([]int, len(ks))
	for j, k := range ks {
		out[j] = k.i
	}
	return out
}

// aheadBudget bounds the bytes of sources claimed and waiting for a read
// slot. Claiming ahead hides each claim's settle window behind the
// sources being read; bounded by bytes, a worker does not sit on large
// sources it will not read for minutes while another worker has nothing
// left. A source larger than the budget takes all of it, so one is always
// let through once nothing else is ahead.
type aheadBudget struct {
	sem   *semaphore.Weighted
	limit int64
}

func newAheadBudget(limit int64) *aheadBudget {
	return &aheadBudget{sem: semaphore.NewWeighted(limit), limit: limit}
}

// take waits until n bytes fit (or nothing else is ahead) and takes them;
// false if ctx ended first.
func (b *aheadBudget) take(ctx context.Context, n int64) bool {
	return b.sem.Acquire(ctx, min(n, b.limit)) == nil
}

// give returns n bytes taken.
func (b *aheadBudget) give(n int64) { b.sem.Release(min(n, b.limit)) }

// claimSet is one Ingest call's claims: held by source id, renewed by one
// goroutine, done when the flusher commits a source's final checkpoint.
type claimSet struct {
	c    Claims
	job  string
	log  *slog.Logger
	mu   sync.Mutex
	held map[string]*heldSource
	// elsewhere are the units of this pass's sources another worker
	// held, by source id: what the wait between passes watches.
	elsewhere map[string]string
}

type heldSource struct {
	h    ClaimHeld
	unit string
	lost bool
}

// claim takes the source with id key of size bytes. done reports a unit
// another worker marked done.
func (cs *claimSet) claim(ctx context.Context, key string, size int64) (held, done bool, err error) {
	cs.mu.Lock()
	_, ok := cs.held[key]
	cs.mu.Unlock()
	if ok {
		return true, false, nil // held since an earlier attempt of this run
	}
	unit := claimUnit(key, size)
	h, err := cs.c.Claim(ctx, cs.job, unit)
	if err != nil {
		return false, false, fmt.Errorf("claim source: %w", err)
	}
	if h == nil {
		left, err := cs.c.Remaining(ctx, cs.job, []string{unit})
		if err != nil {
			return false, false, fmt.Errorf("claim source: %w", err)
		}
		if len(left) > 0 {
			cs.mu.Lock()
			if cs.elsewhere == nil {
				cs.elsewhere = map[string]string{}
			}
			cs.elsewhere[key] = unit
			cs.mu.Unlock()
		}
		return false, len(left) == 0, nil
	}
	cs.mu.Lock()
	cs.held[key] = &heldSource{h: h, unit: unit}
	cs.mu.Unlock()
	cs.log.Debug("claimed source", slog.String("unit", unit))
	return true, false, nil
}

// rekey moves a held claim when re-identifying the source gave another id.
func (cs *claimSet) rekey(from, to string) {
	if from == to {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if h, ok := cs.held[from]; ok {
		delete(cs.held, from)
		cs.held[to] = h
	}
}

// end marks the source with id key done (its final checkpoint is
// committed) or releases it. A failure is logged, not returned: the lease
// then runs out and the next worker finds the checkpoint complete.
func (cs *claimSet) end(ctx context.Context, key string, done bool) {
	cs.mu.Lock()
	h, ok := cs.held[key]
	delete(cs.held, key)
	cs.mu.Unlock()
	if !ok {
		return
	}
	end, what := h.h.Release, "release"
	if done {
		end, what = h.h.Done, "done"
	}
	if err := end(ctx); err != nil {
		cs.log.Warn("could not record the source's claim as "+what, slog.String("unit", h.unit), slog.String("error", err.Error()))
	}
}

// releaseAll releases every claim still held: sources this run did not
// finish, which another worker may take at once.
func (cs *claimSet) releaseAll(ctx context.Context) {
	cs.mu.Lock()
	keys := make([]string, 0, len(cs.held))
	for k := range cs.held {
		keys = append(keys, k)
	}
	cs.mu.Unlock()
	for _, k := range keys {
		cs.end(ctx, k, false)
	}
}

// renew renews every held claim every third of the lease until ctx ends.
func (cs *claimSet) renew(ctx context.Context) {
	t := time.NewTicker(max(cs.c.Lease()/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cs.mu.Lock()
		list := make([]*heldSource, 0, len(cs.held))
		for _, h := range cs.held {
			if !h.lost {
				list = append(list, h)
			}
		}
		cs.mu.Unlock()
		for _, h := range list {
			err := h.h.Renew(ctx)
			switch {
			case errors.Is(err, ErrClaimLost):
				cs.mu.Lock()
				h.lost = true
				cs.mu.Unlock()
				cs.log.Warn("source taken over by another worker after its lease ran out; finishing it anyway (writes are idempotent)",
					slog.String("unit", h.unit))
			case err != nil && ctx.Err() == nil:
				cs.log.Warn("could not renew a source's claim", slog.String("unit", h.unit), slog.String("error", err.Error()))
			}
		}
	}
}

// quickPoll is how often a worker waiting on other workers asks whether
// they are done: a cheap read, where trying again (a claim) costs a settle
// window. Waiting the whole poll instead left a worker idle for up to 2 s
// after the others had finished.
const quickPoll = 200 * time.Millisecond

// WaitOthers waits for other ingest workers: it asks done every 200 ms
// and returns when done reports true or an error, or once poll has
// passed, when the caller tries again itself (a holder may have died).
func WaitOthers(ctx context.Context, poll time.Duration, done func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(poll)
	for {
		wait := min(quickPoll, time.Until(deadline))
		if wait <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if ok, err := done(ctx); ok || err != nil {
			return err
		}
	}
}

// waitElsewhere waits until every source another worker held in the pass
// just ended is done, or poll has passed (the next pass takes a dead
// holder's sources over once their leases run out).
func (cs *claimSet) waitElsewhere(ctx context.Context, poll time.Duration) error {
	cs.mu.Lock()
	units := make([]string, 0, len(cs.elsewhere))
	for _, u := range cs.elsewhere {
		units = append(units, u)
	}
	cs.elsewhere = nil
	cs.mu.Unlock()
	return WaitOthers(ctx, poll, func(ctx context.Context) (bool, error) {
		if len(units) == 0 {
			return false, nil // nothing recorded to watch: the poll is waited out, as before
		}
		left, err := cs.c.Remaining(ctx, cs.job, units)
		if err != nil {
			cs.log.Warn("could not ask whether other workers finished their sources", slog.String("error", err.Error()))
			return false, nil
		}
		units = left
		return len(left) == 0, nil
	})
}

// ingestShared is Ingest for one worker among several: passes over the
// sources, each claiming what no other worker holds, until every source is
// complete or failed here; between passes it waits ClaimPoll for the
// sources other workers hold (finished by them, or taken over when their
// lease runs out).
func (in *Ingester) ingestShared(ctx context.Context, sources []Source) (Summary, error) {
	start := time.Now()
	cs := &claimSet{c: in.opts.Claims, job: ClaimJob(sources), log: in.opts.Logger, held: map[string]*heldSource{}}
	rctx, stopRenew := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); cs.renew(rctx) }()
	defer func() {
		stopRenew()
		wg.Wait()
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cs.releaseAll(ectx)
	}()

	results := make([]SourceResult, len(sources))
	pending := make([]int, len(sources))
	for i := range pending {
		pending[i] = i
	}
	var errs []error
	opts := in.opts
	for pass := 1; ; pass++ {
		sub := make([]Source, len(pending))
		for j, i := range pending {
			sub[j] = sources[i]
		}
		sum, err := in.run(ctx, sub, opts, cs)
		if err != nil {
			errs = append(errs, err)
		}
		var next []int
		for j, i := range pending {
			results[i] = sum.Sources[j]
			if sum.Sources[j].State == stateElsewhere {
				next = append(next, i)
			}
		}
		if len(next) == 0 || ctx.Err() != nil {
			break
		}
		in.opts.Logger.Info("waiting for sources other ingest workers hold", slog.Int("sources", len(next)), slog.Int("pass", pass))
		if err := cs.waitElsewhere(ctx, in.opts.ClaimPoll); err != nil {
			errs = append(errs, err)
			break
		}
		pending = next
		opts.Progress = nil
	}
	sum := Summary{Sources: results}.recount()
	sum.Seconds = time.Since(start).Seconds()
	return sum, errors.Join(errs...)
}
