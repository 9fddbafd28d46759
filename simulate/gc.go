package simulate

import (
	"os"
	"runtime/debug"
)

// gcPercent is the collector's GOGC while a simulation runs. At a page
// size of one token the simulated pools hold a record per token of every
// prefill and decode rank, and the live heap was 790 MB at scale 0.2 and
// 1.56 GB at scale 100; at GOGC=100 the heap grew to twice that between
// collections (1.8 and 3.6 GB RSS). The records hold no pointers, so
// marking them is cheap and collecting at half the growth costs little.
const gcPercent = 50

// TightGC sets GOGC to gcPercent for a simulation, unless the GOGC
// variable is set (the operator's choice stands), and returns what
// restores the setting before it.
func TightGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(gcPercent)
	return func() { debug.SetGCPercent(prev) }
}
