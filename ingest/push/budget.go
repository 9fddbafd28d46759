package push

import (
	"fmt"
	"sync"
)

// Budget bounds the decompressed push bytes held in memory across all
// requests at once. Each request reserves its bytes as it reads them and
// keeps them until it is answered, so the total of bodies being read,
// decoded and handed to the sink never exceeds the bound. A request whose
// next read would pass it is answered 503 with Retry-After (ErrUnavailable)
// and releases what it held, so the requests that remain can finish: under
// contention some requests fail fast instead of all of them waiting.
type Budget struct {
	max int64

	mu   sync.Mutex
	used int64
	peak int64
}

// NewBudget returns a budget of max bytes; max <= 0 means unbounded (nil).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		return nil
	}
	return &Budget{max: max}
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
	held int64
}

func (b *Budget) reserve() *reservation {
	if b == nil {
		return nil
	}
	return &reservation{b: b}
}

// grow reserves n more bytes or fails with ErrUnavailable.
func (r *reservation) grow(n int64) error {
	if r == nil || n <= 0 {
		return nil
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return fmt.Errorf("%w: push bodies being handled would exceed the in-flight bound of %d decompressed bytes", ErrUnavailable, b.max)
	}
	b.used += n
	r.held += n
	if b.used > b.peak {
		b.peak = b.used
	}
	return nil
}

// release returns everything r holds.
func (r *reservation) release() {
	if r == nil || r.held == 0 {
		return
	}
	r.b.mu.Lock()
	r.b.used -= r.held
	r.b.mu.Unlock()
	r.held = 0
}
