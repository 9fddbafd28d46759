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

// Headroom is how far above the live heap the heap may grow once the live
// heap approaches the configured limit: the collector then runs about
// once per Headroom × live of allocation (GOGC=100 runs once per 1 ×
// live), and RSS stays within 1 + Headroom of live plus the runtime's
// other memory (see Target).
const Headroom = 0.5

// poll is how often the live heap is read. The figure changes only when a
// collection ends; a collection of a heap past the limit is tens of
// milliseconds, so a few cycles at most are spent before the limit moves.
const poll = 20 * time.Millisecond

// The runtime metrics the governor reads: the live heap, and the figures
// from which the runtime's memory outside heap objects is derived.
var metricNames = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
}

// Governor holds the process's soft memory limit at the larger of the
// configured floor and the live heap plus Headroom plus the runtime's
// other memory (Target). Stop it to restore the limit that was in force
// before.
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
	// peakOther is the runtime's memory outside heap objects then.
	peakOther int64
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
	sample := make([]metrics.Sample, len(metricNames))
	for i, n := range metricNames {
		sample[i].Name = n
	}
	v := make([]int64, len(sample))
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		for i := range sample {
			if sample[i].Value.Kind() != metrics.KindUint64 {
				return // not this runtime's metrics: leave the floor in force
			}
			v[i] = int64(sample[i].Value.Uint64())
		}
		live, total, released, free, objects := v[0], v[1], v[2], v[3], v[4]
		g.observe(live, max(0, total-released-free-objects))
	}
}

// observe moves the limit for a live heap of live bytes beside other
// bytes of the runtime's memory. Small moves are skipped: each
// SetMemoryLimit recomputes the collector's pacing.
func (g *Governor) observe(live, other int64) {
	want := Target(g.floor, live, other)
	g.mu.Lock()
	defer g.mu.Unlock()
	if d := want - g.current; d == 0 || (want > g.floor && math.Abs(float64(d)) < float64(g.current)/16) {
		return
	}
	g.current = want
	debug.SetMemoryLimit(want)
	if want > g.peak {
		g.peak, g.peakAt, g.peakOther = want, live, other
	}
}

// Target is the limit for a live heap of live bytes under floor: floor,
// or live plus Headroom plus other when that is higher. other is the
// memory the runtime counts against the limit that is neither heap
// objects nor free heap: stacks, the collector's and allocator's
// metadata, and the unused room of spans in use (fragmentation). The
// runtime takes it off the limit before it sets the heap goal
// (memoryLimitHeapGoal in runtime/mgcpacer.go), so a limit of live plus
// Headroom alone left the heap less than Headroom to grow: in an analysis
// at scale 100, 440 of 779 collections had a heap goal within 10% of the
// live heap they left, and the collector took about 40% of kvtrail's CPU
// (docs/performance.md, "Analysis speed").
func Target(floor, live, other int64) int64 {
	return max(floor, live+int64(float64(live)*Headroom)+other)
}

// Peak reports the highest limit set and the live heap and other memory
// that asked for it; the limit is the floor (live and other 0) when the
// live heap never came near.
func (g *Governor) Peak() (limit, live, other int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak, g.peakAt, g.peakOther
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
