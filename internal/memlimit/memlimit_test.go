package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name              string
		floor, live, want int64
	}{
		{"no heap yet", 512 * mib, 0, 512 * mib},
		{"well under the floor", 512 * mib, 100 * mib, 512 * mib},
		{"headroom reaches the floor", 512 * mib, 342 * mib, 513 * mib},
		{"past the floor", 512 * mib, 1100 * mib, 1650 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Target(tc.floor, tc.live); got != tc.want {
				t.Errorf("Target(%d MiB, %d MiB) = %.1f MiB, want %.1f MiB", tc.floor/mib, tc.live/mib,
					float64(got)/mib, float64(tc.want)/mib)
			}
		})
	}
}

// sink keeps the churned allocations on the heap.
var sink []byte

// cycles counts completed GC cycles.
func cycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// holdLive allocates n MiB that stay reachable until the returned slice
// is dropped.
func holdLive(n int) [][]byte {
	live := make([][]byte, n)
	for i := range live {
		live[i] = make([]byte, mib)
		live[i][0] = 1
	}
	return live
}

// churn allocates total bytes of garbage in 4 KiB pieces and returns the
// GC cycles that ran meanwhile.
func churn(total int) uint64 {
	before := cycles()
	for range total / (4 << 10) {
		sink = make([]byte, 4<<10)
	}
	sink = nil
	return cycles() - before
}

// TestGovernorBoundsCollections is the reason for the package: with a
// live heap three times the configured limit, a fixed limit has the
// collector run over and over, and the governed limit once per headroom.
func TestGovernorBoundsCollections(t *testing.T) {
	const floor = 32 * mib
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	live := holdLive(96)
	defer runtime.KeepAlive(live)
	runtime.GC()

	debug.SetMemoryLimit(floor)
	fixed := churn(768 * mib)
	debug.SetMemoryLimit(math.MaxInt64)

	g := Start(floor)
	runtime.GC()
	waitFor(t, func() bool { l, _ := g.Peak(); return l > floor }, "the limit to follow a 96 MiB live heap")
	governed := churn(768 * mib)
	limit, liveAt := g.Peak()
	g.Stop()

	t.Logf("768 MiB of garbage over a 96 MiB live heap: %d cycles under a fixed 32 MiB limit, %d governed (limit %d MiB at live %d MiB)",
		fixed, governed, limit/mib, liveAt/mib)
	// 768 MiB at about 48 MiB of headroom a cycle is 16 cycles (21-23
	// measured: the live figure counts what a cycle's mark found
	// allocated); the fixed limit runs one cycle after another, 74-495
	// of them here depending on how often the GC CPU limiter held it back.
	if governed > 40 {
		t.Errorf("governed: %d GC cycles for 768 MiB of garbage, want at most 40", governed)
	}
	if fixed < 2*governed {
		t.Errorf("fixed limit: %d GC cycles, governed %d: the fixed limit should run at least twice as many", fixed, governed)
	}
	if want := Target(floor, liveAt); limit != want || liveAt < 96*mib {
		t.Errorf("peak limit %d MiB at live %d MiB, want Target = %d MiB at live >= 96 MiB", limit/mib, liveAt/mib, want/mib)
	}
}

func TestGovernorReturnsToFloor(t *testing.T) {
	const floor = 32 * mib
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	g := Start(floor)
	defer g.Stop()
	live := holdLive(96)
	runtime.GC()
	waitFor(t, func() bool { return debug.SetMemoryLimit(-1) > floor }, "the limit to rise above the floor")
	runtime.KeepAlive(live)
	live = nil
	runtime.GC()
	waitFor(t, func() bool { return debug.SetMemoryLimit(-1) == floor }, "the limit to return to the floor")
}

func TestStopRestoresLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(777 * mib))
	g := Start(64 * mib)
	if got := debug.SetMemoryLimit(-1); got != 64*mib {
		t.Fatalf("after Start: limit %d, want %d", got, 64*mib)
	}
	g.Stop()
	if got := debug.SetMemoryLimit(-1); got != 777*mib {
		t.Fatalf("after Stop: limit %d, want the previous %d", got, 777*mib)
	}
}

// waitFor polls cond for up to 5 s (collections are forced meanwhile, as
// the live heap figure changes only when one ends).
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.GC()
		time.Sleep(poll)
	}
}
