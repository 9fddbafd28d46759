package workclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/internal/workclaim"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// Two workers, each with many goroutines, race for the same units on the
// real server: every unit is held by exactly one worker (no attempt has two
// winners), and the claim rows agree (the earliest row of the attempt won
// is the winner's). A claim whose insert was acknowledged too late for the
// settle window is withdrawn, so under load a unit may be won in a later
// attempt; never twice.
func TestRacingWorkersEachUnitWonOnce(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	const units, goroutines = 24, 6
	var all []string
	for i := range units {
		all = append(all, fmt.Sprintf("u%02d", i))
	}
	for _, tt := range []struct {
		name string
		now  func() time.Time // nil: the real clock
	}{
		{"real clock", nil},
		// One pinned instant for both: every race is a tie on time,
		// decided by the worker name.
		{"pinned clock, ties", func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := "race-" + tt.name
			coords := []*workclaim.Coordinator{
				{Store: s, Worker: "worker-a", Lease: time.Hour, Settle: 200 * time.Millisecond, Now: tt.now},
				{Store: s, Worker: "worker-b", Lease: time.Hour, Settle: 200 * time.Millisecond, Now: tt.now},
			}
			var mu sync.Mutex
			won := map[string][]string{} // unit → workers holding it
			attempt := map[string]uint32{}
			var wg sync.WaitGroup
			for ci, c := range coords {
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						order := append([]string(nil), all...)
						rand.New(rand.NewSource(int64(ci*100+g))).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
						// Rounds until every unit is held: a withdrawn claim
						// (acknowledged too late on a loaded machine) leaves
						// its unit to a later try.
						for round := 0; round < 50; round++ {
							left := 0
							for _, u := range order {
								mu.Lock()
								taken := len(won[u]) > 0
								mu.Unlock()
								if taken {
									continue
								}
								left++
								h, err := c.Claim(ctx, job, u)
								if err != nil {
									t.Error(err)
									return
								}
								if h != nil {
									mu.Lock()
									won[u] = append(won[u], c.Worker)
									attempt[u] = h.Attempt
									mu.Unlock()
								}
							}
							if left == 0 {
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			rows, err := s.JobClaims(ctx, job, "")
			if err != nil {
				t.Fatal(err)
			}
			earliest := map[string]domain.Claim{}
			for _, r := range rows {
				e, ok := earliest[r.Unit]
				if r.Attempt == attempt[r.Unit] && (!ok || r.At.Before(e.At) || (r.At.Equal(e.At) && r.Worker < e.Worker)) {
					earliest[r.Unit] = r
				}
			}
			perWorker := map[string]int{}
			for _, u := range all {
				if len(won[u]) != 1 {
					t.Errorf("unit %s won by %v, want exactly one worker", u, won[u])
					continue
				}
				perWorker[won[u][0]]++
				if e := earliest[u]; e.Worker != won[u][0] {
					t.Errorf("unit %s: held by %s but the earliest row of attempt %d is %s's", u, won[u][0], attempt[u], e.Worker)
				}
			}
			later := 0
			for _, a := range attempt {
				if a > 1 {
					later++
				}
			}
			t.Logf("%d claim rows; units won per worker: %v; %d units won after a withdrawn attempt", len(rows), perWorker, later)
		})
	}
}

// clock is a pinned clock a test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A lease that is not renewed is taken over by the next attempt once it
// has run out, not before; a renewed one is not; the old holder's renewal
// then reports the loss; a released unit is claimable at once; done units
// are never claimed again.
func TestLeaseExpiryRenewReleaseDone(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	const lease = time.Minute
	type step struct {
		advance time.Duration // move the clock first
		do      string        // claim-a, claim-b, renew-a, renew-b, release-a, done-a, done-b
		want    string        // for claims: "nil" or the attempt won ("1", "2", ...); else "ok" or "lost"
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"expiry takeover", []step{
			{0, "claim-a", "1"},
			{lease - time.Second, "claim-b", "nil"}, // still leased
			{2 * time.Second, "claim-b", "2"},       // ran out: taken over
			{0, "renew-a", "lost"},
			{0, "claim-a", "nil"}, // b holds attempt 2
			{0, "renew-b", "ok"},
		}},
		{"renewal keeps it", []step{
			{0, "claim-a", "1"},
			{lease / 2, "renew-a", "ok"},
			{lease / 2, "renew-a", "ok"},
			{lease / 2, "claim-b", "nil"}, // 1.5 leases after the claim, 1/2 after the renewal
			{lease, "claim-b", "2"},
		}},
		{"release", []step{
			{0, "claim-a", "1"},
			{0, "release-a", "ok"},
			{0, "claim-b", "2"}, // at once, no lease to wait for
		}},
		{"done", []step{
			{0, "claim-a", "1"},
			{0, "done-a", "ok"},
			{10 * lease, "claim-b", "nil"},
			{0, "claim-a", "nil"},
		}},
		{"done after takeover still counts", []step{
			{0, "claim-a", "1"},
			{2 * lease, "claim-b", "2"},
			{0, "done-a", "ok"}, // a finished its (idempotent) work anyway
			{0, "renew-b", "lost"},
			{10 * lease, "claim-b", "nil"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
			c := map[string]*workclaim.Coordinator{
				// A settle window of a second: a claim acknowledged after
				// half of it is withdrawn, which on a loaded machine would
				// make these expected outcomes flaky.
				"a": {Store: s, Worker: "a", Lease: lease, Settle: time.Second, Now: clk.Now},
				"b": {Store: s, Worker: "b", Lease: lease, Settle: time.Second, Now: clk.Now},
			}
			held := map[string]*workclaim.Held{}
			job := "lease-" + tt.name
			for i, st := range tt.steps {
				clk.Add(st.advance)
				var op, w string
				op, w = st.do[:len(st.do)-2], st.do[len(st.do)-1:]
				got := "ok"
				var err error
				switch op {
				case "claim":
					var h *workclaim.Held
					h, err = c[w].Claim(ctx, job, "unit")
					got = "nil"
					if h != nil {
						held[w], got = h, fmt.Sprint(h.Attempt)
					}
				case "renew":
					err = held[w].Renew(ctx)
				case "release":
					err = held[w].Release(ctx)
				case "done":
					err = held[w].Done(ctx)
				}
				if errors.Is(err, workclaim.ErrLost) {
					got, err = "lost", nil
				}
				if err != nil {
					t.Fatalf("step %d %s: %v", i, st.do, err)
				}
				if got != st.want {
					t.Fatalf("step %d %s (clock +%s): got %s, want %s", i, st.do, clk.Now().Sub(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), got, st.want)
				}
			}
		})
	}
}

// Remaining lists the units not done, whatever their claims, in the order
// asked.
func TestRemaining(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	c := &workclaim.Coordinator{Store: s, Worker: "w", Lease: time.Hour, Settle: time.Second}
	units := []string{"c", "a", "b", "d"}
	if got, err := c.Remaining(ctx, "job", units); err != nil || fmt.Sprint(got) != "[c a b d]" {
		t.Fatalf("nothing claimed: Remaining = %v, %v", got, err)
	}
	for _, u := range []string{"a", "b", "d"} {
		h, err := c.Claim(ctx, "job", u)
		if err != nil || h == nil {
			t.Fatalf("claim %s: %v, %v", u, h, err)
		}
		if u != "b" {
			if err := h.Done(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another job's units of the same names are not this job's.
	if h, err := c.Claim(ctx, "other", "c"); err != nil || h == nil {
		t.Fatalf("claim other/c: %v, %v", h, err)
	} else if err := h.Done(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Remaining(ctx, "job", units)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != "[b c]" {
		t.Fatalf("Remaining = %v, want [b c] (b held, c never claimed)", got)
	}
}

// slowInserts is a store whose claim inserts are acknowledged late.
type slowInserts struct {
	workclaim.Store
	delay time.Duration
}

func (s *slowInserts) InsertClaim(ctx context.Context, c domain.Claim) error {
	time.Sleep(s.delay)
	return s.Store.InsertClaim(ctx, c)
}

// A claim whose insert is acknowledged later than half the settle window
// is withdrawn (a released row, so the next attempt need not wait out a
// lease), and the Coordinator counts it with the slowest acknowledgement,
// which is what tells a user the window is too short for the servers.
func TestLateAcknowledgementWithdraws(t *testing.T) {
	ctx := context.Background()
	slow := &slowInserts{Store: testdb.New(t), delay: 150 * time.Millisecond}
	c := &workclaim.Coordinator{Store: slow, Worker: "w", Lease: time.Hour, Settle: 200 * time.Millisecond}
	if n, _ := c.Withdrawn(); n != 0 {
		t.Fatalf("%d withdrawn before any claim", n)
	}
	for i := 1; i <= 2; i++ {
		if h, err := c.Claim(ctx, "job", "u"); err != nil || h != nil {
			t.Fatalf("claim %d acknowledged after %s of a 200ms window: %v, %v (want withdrawn)", i, slow.delay, h, err)
		}
		if n, slowest := c.Withdrawn(); n != i || slowest < slow.delay {
			t.Fatalf("after %d late claims: Withdrawn = %d, %s", i, n, slowest)
		}
	}
	rows, err := slow.JobClaims(ctx, "job", "u")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, r := range rows {
		states = append(states, fmt.Sprintf("%d/%s", r.Attempt, r.State))
	}
	sort.Strings(states)
	if want := "[1/claimed 1/released 2/claimed 2/released]"; fmt.Sprint(states) != want {
		t.Fatalf("claim rows %v, want %s", states, want)
	}
	slow.delay = 0
	h, err := c.Claim(ctx, "job", "u")
	if err != nil || h == nil || h.Attempt != 3 {
		t.Fatalf("claim with prompt inserts: %+v, %v; want attempt 3 won", h, err)
	}
	if n, _ := c.Withdrawn(); n != 2 {
		t.Fatalf("a claim won counted as withdrawn: %d", n)
	}
}
