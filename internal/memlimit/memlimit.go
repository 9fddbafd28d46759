// Package memlimit runs Go's soft memory limit as a target that gives way
// to the live heap instead of a ceiling the collector fights.
//
// Why: with debug.SetMemoryLimit the collector's heap goal is the smaller
// of GOGC's (twice the live heap) and the limit. Once the live heap itself
// passes the limit the goal is below it, so the collector runs again as
// soon as it finishes, bounded only by the runtime's GC CPU limiter (half
// of GOMAXPROCS). An analysis at scale 20 under a 200 MiB limit, below its
// live heap, took 204 CPU-seconds of kvtrail where 512 MiB took 75-79; at
// scale 100 the live heap (1.1 GB in the replay) is past the 512 MiB
// default for most of the run. A limit that follows the live heap with a
// fixed headroom keeps the collector to one cycle per headroom of
// allocation, and returns to the configured figure when the heap shrinks.
//
// While it runs, the limit is the collector's only trigger (GOGC off,
// unless the GOGC variable sets it): under GOGC=100 a heap far below the
// limit was collected at every doubling anyway, and an analysis at scale 2
// (live heap about 200 MB under the 512 MiB default) spent 7.5-7.8 user
// CPU-seconds where the limit alone took 5.8-6.3, peak RSS 380-513 MB
// against 561-572 (docs/performance.md). The heap is bounded by the limit
// either way.
package memlimit

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Headroom is how far above the live heap the limit is kept once the live
// heap approaches the configured limit: the collector then runs about
// once per Headroom × live of allocation (GOGC=100 runs once per 1 ×
// live), and the heap, hence RSS, stays within 1 + Headroom of live.
const Headroom = 0.5

// poll is how often the live heap is read. The figure changes only when a
// collection ends; a collection of a heap past the limit is tens of
// milliseconds, so a few cycles at most are spent before the limit moves.
const poll = 20 * time.Millisecond

const liveMetric = "/gc/heap/live:bytes"

// Governor holds the process's soft memory limit at the larger of the
// configured floor and the live heap plus Headroom. Stop it to restore the
// limit that was in force before.
type Governor struct {
	floor  int64
	prev   int64
	prevGC int // GC percent before Start; restored by Stop
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	current int64
	peak    int64
	peakAt  int64 // the live heap when peak was set
}

// Start sets floor (bytes, > 0) as the soft memory limit, turns GOGC's
// trigger off unless the GOGC variable set one, and starts following the
// live heap. The caller must Stop it.
func Start(floor int64) *Governor {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Governor{floor: floor, cancel: cancel, done: make(chan struct{}), current: floor, peak: floor}
	g.prev = debug.SetMemoryLimit(floor)
	g.prevGC = debug.SetGCPercent(-1)
	if os.Getenv("GOGC") != "" {
		debug.SetGCPercent(g.prevGC) // the operator's choice stands
	}
	go g.run(ctx)
	return g
}

func (g *Governor) run(ctx context.Context) {
	defer close(g.done)
	sample := []metrics.Sample{{Name: liveMetric}}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // not this runtime's metric: leave the floor in force
		}
		g.observe(int64(sample[0].Value.Uint64()))
	}
}

// observe moves the limit for a live heap of live bytes. Small moves are
// skipped: each SetMemoryLimit recomputes the collector's pacing.
func (g *Governor) observe(live int64) {
	want := Target(g.floor, live)
	g.mu.Lock()
	defer g.mu.Unlock()
	if d := want - g.current; d == 0 || (want > g.floor && math.Abs(float64(d)) < float64(g.current)/16) {
		return
	}
	g.current = want
	debug.SetMemoryLimit(want)
	if want > g.peak {
		g.peak, g.peakAt = want, live
	}
}

// Target is the limit for a live heap of live bytes under floor: floor,
// or live plus Headroom when that is higher.
func Target(floor, live int64) int64 {
	return max(floor, live+int64(float64(live)*Headroom))
}

// Peak reports the highest limit set and the live heap that asked for it;
// the limit is the floor (and live 0) when the live heap never came near.
func (g *Governor) Peak() (limit, live int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak, g.peakAt
}

// Stop ends the following and restores the limit and GC percent in force
// before Start. The GC percent goes back first: with it off and the old
// limit (often none) back, nothing would trigger a collection.
func (g *Governor) Stop() {
	g.cancel()
	<-g.done
	debug.SetGCPercent(g.prevGC)
	debug.SetMemoryLimit(g.prev)
}
