package push

import (
	"fmt"
	"sync"
	"time"
)

// Budget bounds the decompressed push bytes held in memory across all
// requests at once. Each request reserves its bytes as it reads them and
// keeps them until it is answered, so the total of bodies being read,
// decoded and handed to the sink never exceeds the bound.
//
// When a read would pass the bound, the oldest request still being handled
// waits for room (the others are failing and releasing theirs); every
// other request is answered 503 with Retry-After (ErrUnavailable) and
// releases what it held. So under contention the oldest body always gets
// through, the rest fail fast, and nothing waits on a request that waits.
type Budget struct {
	max int64

	mu     sync.Mutex
	cond   *sync.Cond
	used   int64
	peak   int64
	seq    uint64
	active map[uint64]bool
}

// budgetWait bounds how long the oldest request waits for room.
const budgetWait = 30 * time.Second

// NewBudget returns a budget of max bytes; max <= 0 means unbounded (nil).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		return nil
	}
	b := &Budget{max: max, active: map[uint64]bool{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Max is the bound in bytes.
func (b *Budget) Max() int64 { return b.max }

// InUse returns the bytes reserved now and the most ever reserved at once.
func (b *Budget) InUse() (now, peak int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// reservation is one request's share of a Budget; nil means unbounded.
type reservation struct {
	b    *Budget
	seq  uint64
	held int64
}

func (b *Budget) reserve() *reservation {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	b.active[b.seq] = true
	return &reservation{b: b, seq: b.seq}
}

// oldest reports whether r is the oldest active reservation. mu held.
func (r *reservation) oldest() bool {
	for s := range r.b.active {
		if s < r.seq {
			return false
		}
	}
	return true
}

// grow reserves n more bytes or fails with ErrUnavailable.
func (r *reservation) grow(n int64) error {
	if r == nil || n <= 0 {
		return nil
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	deadline := time.Now().Add(budgetWait)
	for b.used+n > b.max {
		if r.held+n > b.max || !r.oldest() || time.Now().After(deadline) {
			return fmt.Errorf("%w: push bodies being handled would exceed the in-flight bound of %d decompressed bytes", ErrUnavailable, b.max)
		}
		// Woken by every release; the deadline is checked then, and a
		// timer makes sure a wakeup comes.
		t := time.AfterFunc(time.Until(deadline), func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
		b.cond.Wait()
		t.Stop()
	}
	b.used += n
	r.held += n
	if b.used > b.peak {
		b.peak = b.used
	}
	return nil
}

// release returns everything r holds and ends it.
func (r *reservation) release() {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	b.used -= r.held
	r.held = 0
	delete(b.active, r.seq)
	b.cond.Broadcast()
	b.mu.Unlock()
}
