package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// peakHeapProfiler writes a heap profile each time the live heap passes
// its previous peak by a tenth, so that the file left at the end shows
// what was held near the process' peak, not what is left when it exits
// (which is what --memprofile's allocation profile cannot tell: it counts
// what was allocated, not what was held at once).
type peakHeapProfiler struct {
	path string
	stop chan struct{}
	done sync.WaitGroup
	err  error
	peak uint64
}

// startPeakHeapProfile samples the heap every 50 ms until stop is called.
func startPeakHeapProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	f.Close()
	p := &peakHeapProfiler{path: path, stop: make(chan struct{})}
	p.done.Add(1)
	go p.run()
	return func() error {
		close(p.stop)
		p.done.Wait()
		return p.err
	}, nil
}

func (p *peakHeapProfiler) run() {
	defer p.done.Done()
	// The live heap as the last collection marked it: the heap's objects
	// (/memory/classes/heap/objects) count garbage not yet swept too, so
	// under a soft memory limit they sit near the limit from the first
	// seconds and an early sample was never passed again: the profile left
	// was of the command's start.
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			if p.peak == 0 { // a command shorter than one tick
				p.err = p.write()
			}
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		live := sample[0].Value.Uint64()
		if live < p.peak+p.peak/10 {
			continue
		}
		p.peak = live
		// A heap profile is published when a collection's sweep ends,
		// after the live figure moved at its mark: written now it could be
		// a cycle old and miss the growth that set the peak. A collection
		// of our own publishes the current one; it costs one per tenth the
		// peak grows, on a diagnostic flag.
		runtime.GC()
		if err := p.write(); err != nil {
			p.err = err
			return
		}
	}
}

func (p *peakHeapProfiler) write() error { return writeProfile("heap", "heap profile", p.path) }
