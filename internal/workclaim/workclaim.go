// Package workclaim splits the units of a job (ingest sources, analysis
// lanes) between worker processes that may run on different machines and
// share nothing but ClickHouse. Each unit is claimed by one worker for an
// attempt, held under a lease the worker renews while it works, and marked
// done when its work is committed; a crashed worker's unit is taken over by
// the next attempt once its lease has run out.
//
// ClickHouse 18.16 has no transactions and no compare-and-set, so a claim
// is decided by reading: work_claims is append-only, and the winner of an
// attempt is its earliest row (by the claimer's clock, then by worker
// name). A claimer reads the unit's rows, inserts a row for attempt =
// last+1 only if that attempt has none yet, waits Settle, reads again and
// backs off unless its own row is the earliest of the attempt.
//
// Why that is safe enough. Two claimers that both pass the first read (the
// read→insert gap) both insert; the re-read after Settle sees both rows
// and both pick the same winner, provided each re-read sees every row of
// the attempt that sorts before its own. A claimer counts its claim only
// if its insert was acknowledged within Settle/2 of the row's time, and
// re-reads at least Settle after its own acknowledgement. So a rival row
// stamped earlier than ours was acknowledged before our re-read, as long
// as the clocks of the machines differ by less than Settle/2; and
// ClickHouse shows an acknowledged insert to the next read (on a cluster:
// synchronous Distributed inserts, load_balancing=in_order and a connection
// to a first replica, so writers and readers use the same first live
// replica of the job's shard, docs/cluster.md). The work the claims split is idempotent downstream
// (ingest writes the same keys whoever writes them, ReplacingMergeTree
// folds them), so the claims only have to prevent wasted work, never
// double counting.
//
// Where it is not safe: clocks more than Settle/2 apart; a replica
// failover between a claim and a rival's read on a cluster with
// insert_quorum below the replica count (the rival reads a replica that
// has not fetched the claim yet); and a holder that stalls past its lease
// (a GC pause, a suspended VM, a network partition): its unit is taken
// over while it still works, and both write it. In each case two workers
// do the same unit, which costs time, not correctness. Worker names must
// be unique (two processes under one name would tie).
package workclaim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Store keeps the claim rows (work_claims); internal/chstore.Store
// implements it.
type Store interface {
	// InsertClaim appends one claim row.
	InsertClaim(ctx context.Context, c domain.Claim) error
	// JobClaims returns the rows of job, of one unit when unit is not "".
	JobClaims(ctx context.Context, job, unit string) ([]domain.Claim, error)
}

// Defaults of the Coordinator's durations.
const (
	DefaultLease  = 30 * time.Second
	DefaultSettle = time.Second
)

// ErrLost is returned by Renew when another worker took the unit over (the
// lease ran out before the renewal) or it is already done.
var ErrLost = errors.New("workclaim: the claim was taken over")

// Coordinator claims units for one worker. Use it by pointer; one
// Coordinator may be shared by the goroutines of a process (it never
// claims a unit twice at once).
type Coordinator struct {
	Store Store
	// Worker names this worker; unique among the workers of a job.
	Worker string
	// Lease is how long a claim holds without renewal (DefaultLease).
	Lease time.Duration
	// Settle is how long a claimer waits between its claim and the read
	// that decides it (DefaultSettle). It must exceed twice the clock skew
	// between the workers' machines, and an insert acknowledged later
	// than Settle/2 after its row's time is withdrawn.
	Settle time.Duration
	// Now is the clock the rows are stamped with (time.Now).
	Now func() time.Time

	mu   sync.Mutex
	busy map[string]bool // job\x00unit being claimed or held by this process
	// withdrawn counts the claims withdrawn for a late acknowledgement,
	// slowest the longest of those acknowledgements (Withdrawn).
	withdrawn, slowest int64
}

// Withdrawn reports how many claims this Coordinator withdrew because
// ClickHouse acknowledged their insert later than half the settle window,
// and the slowest of those acknowledgements. Each such unit is left for a
// later pass, so a worker whose inserts are that slow all the time moves
// from pass to pass instead of working: the settle window is then too
// short for the servers, which the caller tells its user.
func (c *Coordinator) Withdrawn() (n int, slowest time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.withdrawn), time.Duration(c.slowest)
}

func (c *Coordinator) noteWithdrawn(ack time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.withdrawn++
	c.slowest = max(c.slowest, int64(ack))
}

func (c *Coordinator) lease() time.Duration {
	if c.Lease > 0 {
		return c.Lease
	}
	return DefaultLease
}

func (c *Coordinator) settle() time.Duration {
	if c.Settle > 0 {
		return c.Settle
	}
	return DefaultSettle
}

func (c *Coordinator) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// take marks job/unit busy in this process; false if it already is.
func (c *Coordinator) take(job, unit string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy == nil {
		c.busy = map[string]bool{}
	}
	k := job + "\x00" + unit
	if c.busy[k] {
		return false
	}
	c.busy[k] = true
	return true
}

func (c *Coordinator) free(job, unit string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, job+"\x00"+unit)
}

// Held is a unit this worker holds for one attempt.
type Held struct {
	c       *Coordinator
	Job     string
	Unit    string
	Attempt uint32
	mu      sync.Mutex
	until   time.Time
	ended   bool
}

// LeaseUntil is when the claim stops holding unless renewed.
func (h *Held) LeaseUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// Claim takes unit of job for this worker. It returns nil, nil when the
// unit is done, when another worker (or another goroutine of this one)
// holds a live lease on it, or when a rival won the race for it.
func (c *Coordinator) Claim(ctx context.Context, job, unit string) (*Held, error) {
	if c.Worker == "" {
		return nil, errors.New("workclaim: no worker name")
	}
	if !c.take(job, unit) {
		return nil, nil
	}
	h, err := c.claim(ctx, job, unit)
	if h == nil {
		c.free(job, unit)
	}
	return h, err
}

func (c *Coordinator) claim(ctx context.Context, job, unit string) (*Held, error) {
	rows, err := c.Store.JobClaims(ctx, job, unit)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", unit, err)
	}
	st := summarize(rows)
	now := c.now()
	if st.done || st.held(now) {
		return nil, nil
	}
	row := domain.Claim{Job: job, Unit: unit, Worker: c.Worker, Attempt: st.attempt + 1, State: domain.ClaimClaimed,
		At: now, LeaseUntil: now.Add(c.lease())}
	start := time.Now() // monotonic: how long the insert took to be acknowledged
	if err := c.Store.InsertClaim(ctx, row); err != nil {
		return nil, fmt.Errorf("claim %s: %w", unit, err)
	}
	if ack := time.Since(start); ack > c.settle()/2 {
		// Acknowledged too late for the settle window to cover a rival's
		// re-read: withdraw (a released row lets the next attempt start
		// at once should this row win) and let a later pass retry.
		c.noteWithdrawn(ack)
		rel := row
		rel.State, rel.At, rel.LeaseUntil = domain.ClaimReleased, c.now(), time.Time{}
		if err := c.Store.InsertClaim(ctx, rel); err != nil {
			return nil, fmt.Errorf("withdraw claim %s: %w", unit, err)
		}
		return nil, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(c.settle()):
	}
	if rows, err = c.Store.JobClaims(ctx, job, unit); err != nil {
		return nil, fmt.Errorf("claim %s: %w", unit, err)
	}
	w, ok := winner(rows, row.Attempt)
	if !ok || w.Worker != row.Worker || !w.At.Equal(row.At) {
		return nil, nil // a rival's row is earlier: it holds the attempt
	}
	return &Held{c: c, Job: job, Unit: unit, Attempt: row.Attempt, until: row.LeaseUntil}, nil
}

// Renew extends the lease (the worker's heartbeat). It returns ErrLost,
// and writes nothing, when a later attempt has begun (the lease had run
// out) or the unit is done; the caller may finish its work anyway, which
// is idempotent, or stop.
func (h *Held) Renew(ctx context.Context) error {
	rows, err := h.c.Store.JobClaims(ctx, h.Job, h.Unit)
	if err != nil {
		return fmt.Errorf("renew %s: %w", h.Unit, err)
	}
	st := summarize(rows)
	if st.done || st.attempt != h.Attempt || st.winner.Worker != h.c.Worker || st.released {
		return ErrLost
	}
	now := h.c.now()
	until := now.Add(h.c.lease())
	if err := h.c.Store.InsertClaim(ctx, domain.Claim{Job: h.Job, Unit: h.Unit, Worker: h.c.Worker, Attempt: h.Attempt,
		State: domain.ClaimClaimed, At: now, LeaseUntil: until}); err != nil {
		return fmt.Errorf("renew %s: %w", h.Unit, err)
	}
	h.mu.Lock()
	h.until = until
	h.mu.Unlock()
	return nil
}

// Done marks the unit done: no worker claims it again. It is written even
// if the claim was taken over meanwhile, since the work was completed.
func (h *Held) Done(ctx context.Context) error { return h.end(ctx, domain.ClaimDone) }

// Release gives the unit up unfinished: another worker may claim it at
// once instead of after the lease.
func (h *Held) Release(ctx context.Context) error { return h.end(ctx, domain.ClaimReleased) }

func (h *Held) end(ctx context.Context, state string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return nil
	}
	now := h.c.now()
	if err := h.c.Store.InsertClaim(ctx, domain.Claim{Job: h.Job, Unit: h.Unit, Worker: h.c.Worker, Attempt: h.Attempt,
		State: state, At: now}); err != nil {
		return fmt.Errorf("mark %s %s: %w", h.Unit, state, err)
	}
	h.ended = true
	h.c.free(h.Job, h.Unit)
	return nil
}

// Remaining returns the units of job that are not done, in the order
// given: what is left for someone to claim or finish.
func (c *Coordinator) Remaining(ctx context.Context, job string, units []string) ([]string, error) {
	rows, err := c.Store.JobClaims(ctx, job, "")
	if err != nil {
		return nil, fmt.Errorf("remaining of %s: %w", job, err)
	}
	done := map[string]bool{}
	for _, r := range rows {
		if r.State == domain.ClaimDone {
			done[r.Unit] = true
		}
	}
	var out []string
	for _, u := range units {
		if !done[u] {
			out = append(out, u)
		}
	}
	return out, nil
}

// unitState is what a unit's rows say.
type unitState struct {
	done bool
	// attempt is the latest attempt (0: never claimed); winner its
	// earliest row, until the latest lease its winner wrote, released
	// whether the winner gave it up.
	attempt  uint32
	winner   domain.Claim
	until    time.Time
	released bool
}

// held reports a live lease at now.
func (s unitState) held(now time.Time) bool {
	return s.attempt > 0 && !s.released && now.Before(s.until)
}

// earlier orders rows within an attempt: time, then worker name.
func earlier(a, b domain.Claim) bool {
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return a.Worker < b.Worker
}

// winner is the earliest row of attempt among rows.
func winner(rows []domain.Claim, attempt uint32) (domain.Claim, bool) {
	var w domain.Claim
	ok := false
	for _, r := range rows {
		if r.Attempt == attempt && (!ok || earlier(r, w)) {
			w, ok = r, true
		}
	}
	return w, ok
}

// summarize reads a unit's rows. A done row of any attempt makes the unit
// done: only a holder writes one, and the work it covers is complete.
func summarize(rows []domain.Claim) unitState {
	var st unitState
	for _, r := range rows {
		if r.State == domain.ClaimDone {
			st.done = true
		}
		st.attempt = max(st.attempt, r.Attempt)
	}
	if st.attempt == 0 {
		return st
	}
	st.winner, _ = winner(rows, st.attempt)
	for _, r := range rows {
		if r.Attempt != st.attempt || r.Worker != st.winner.Worker {
			continue
		}
		switch r.State {
		case domain.ClaimReleased:
			st.released = true
		case domain.ClaimClaimed:
			if r.LeaseUntil.After(st.until) {
				st.until = r.LeaseUntil
			}
		}
	}
	return st
}
