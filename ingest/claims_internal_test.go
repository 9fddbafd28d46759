package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// Each worker takes the sources in an order of its own: the same for the
// same worker and list, every source once, and two workers' orders
// differ, so that they do not claim the same source one after another.
func TestClaimOrder(t *testing.T) {
	var sources []Source
	for i := range 40 {
		sources = append(sources, Source{Node: fmt.Sprintf("n%d", i%5), Path: fmt.Sprintf("/logs/%d.log", i)})
	}
	a, b := claimOrder("w0", sources), claimOrder("w1", sources)
	if !slices.Equal(a, claimOrder("w0", sources)) {
		t.Fatal("one worker's order changed between calls")
	}
	for _, o := range [][]int{a, b} {
		sorted := slices.Sorted(slices.Values(o))
		for i, v := range sorted {
			if v != i {
				t.Fatalf("order %v is not a permutation of the %d sources", o, len(sources))
			}
		}
	}
	// Where both workers would start: the first quarter of each order
	// shares few sources (for independent shuffles, 2.5 of 10 expected).
	shared := 0
	for _, i := range a[:10] {
		if slices.Contains(b[:10], i) {
			shared++
		}
	}
	if shared > 6 {
		t.Errorf("w0 and w1 start with %d of the same 10 sources: %v, %v", shared, a[:10], b[:10])
	}
	if slices.Equal(a, b) {
		t.Error("two workers take the sources in the same order")
	}
}

// The budget lets sources through while their bytes fit, one however
// large when nothing else is ahead, and blocks the rest until bytes are
// given back or the context ends.
func TestAheadBudget(t *testing.T) {
	b := newAheadBudget(100)
	ctx := context.Background()
	if !b.take(ctx, 60) || !b.take(ctx, 40) {
		t.Fatal("sources within the budget were held back")
	}
	got := make(chan bool, 1)
	go func() { got <- b.take(ctx, 30) }()
	select {
	case <-got:
		t.Fatal("a source past the budget went through")
	case <-time.After(50 * time.Millisecond):
	}
	b.give(60)
	if !<-got {
		t.Fatal("the waiting source failed after bytes were given back")
	}
	b.give(40)
	b.give(30)
	if !b.take(ctx, 1000) {
		t.Fatal("a source larger than the budget never goes through")
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { got <- b.take(cctx, 1) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case ok := <-got:
		if ok {
			t.Fatal("a take whose context ended reported success")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a take stayed blocked after its context ended")
	}
}

// remainingClaims answers Remaining from a set of done units.
type remainingClaims struct {
	mu   sync.Mutex
	done map[string]bool
}

func (r *remainingClaims) Claim(context.Context, string, string) (ClaimHeld, error) { return nil, nil }
func (r *remainingClaims) Lease() time.Duration                                     { return time.Minute }
func (r *remainingClaims) Worker() string                                           { return "w" }
func (r *remainingClaims) Remaining(_ context.Context, _ string, units []string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var left []string
	for _, u := range units {
		if !r.done[u] {
			left = append(left, u)
		}
	}
	return left, nil
}

// Between passes a worker waits for the sources others hold: it goes on
// as soon as they are done, not a whole poll later, and waits the poll
// out while one is not.
func TestWaitElsewhere(t *testing.T) {
	rc := &remainingClaims{done: map[string]bool{}}
	cs := &claimSet{c: rc, job: "j", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		elsewhere: map[string]string{"a": "ua", "b": "ub"}}
	go func() {
		time.Sleep(300 * time.Millisecond)
		rc.mu.Lock()
		rc.done["ua"], rc.done["ub"] = true, true
		rc.mu.Unlock()
	}()
	start := time.Now()
	if err := cs.waitElsewhere(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("waited %v for sources done after 0.3 s", took)
	}
	if cs.elsewhere != nil {
		t.Error("the pass's sources seen elsewhere were not cleared")
	}

	cs.elsewhere = map[string]string{"c": "uc"} // never done
	start = time.Now()
	if err := cs.waitElsewhere(context.Background(), 700*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 700*time.Millisecond {
		t.Errorf("went on after %v while a source was still held elsewhere", took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs.elsewhere = map[string]string{"c": "uc"}
	if err := cs.waitElsewhere(ctx, time.Minute); err == nil {
		t.Error("a wait whose context ended returned no error")
	}
}
