package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/kvtrail/kvtrail/internal/config"
)

// TestMemoryLimitModes: a bulk ingest runs with memory_limit as the
// collector's only trigger (GOGC off) and gets the GC percent and limit
// back when it ends; serving commands get memory_limit as a fixed limit and
// keep GOGC; GOMEMLIMIT set, or memory_limit 0, leaves both alone.
func TestMemoryLimitModes(t *testing.T) {
	const lim = 200 << 20
	prevLim := debug.SetMemoryLimit(math.MaxInt64)
	prevGC := debug.SetGCPercent(100)
	defer func() {
		debug.SetMemoryLimit(prevLim)
		debug.SetGCPercent(prevGC)
	}()
	for _, tc := range []struct {
		name              string
		limit             int64
		gomemlimit        bool
		wantLimit, wantGC int64
		serveLimit        int64
	}{
		{"configured", lim, false, lim, -1, lim},
		{"off", 0, false, math.MaxInt64, 100, math.MaxInt64},
		{"GOMEMLIMIT wins", lim, true, math.MaxInt64, 100, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gomemlimit {
				t.Setenv("GOMEMLIMIT", "1GiB") // read by kvtrail; the runtime read it at start
			}
			t.Setenv("GOGC", "") // unset for memlimit's "the operator's GOGC stands"
			a := &app{cfg: config.Default()}
			a.cfg.MemoryLimit = tc.limit
			stop := a.governMemory()
			gotLimit, gotGC := debug.SetMemoryLimit(-1), int64(debug.SetGCPercent(-1))
			debug.SetGCPercent(int(gotGC))
			stop()
			if gotLimit != tc.wantLimit || gotGC != tc.wantGC {
				t.Errorf("ingest: limit %d, GC percent %d; want %d, %d", gotLimit, gotGC, tc.wantLimit, tc.wantGC)
			}
			if l, gc := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1); l != math.MaxInt64 || gc != 100 {
				t.Errorf("after the ingest: limit %d, GC percent %d; want both restored", l, gc)
			} else {
				debug.SetGCPercent(gc)
			}
			a.limitMemory()
			gotLimit, gotGC = debug.SetMemoryLimit(math.MaxInt64), int64(debug.SetGCPercent(-1))
			debug.SetGCPercent(int(gotGC))
			if gotLimit != tc.serveLimit || gotGC != 100 {
				t.Errorf("serve: limit %d, GC percent %d; want %d, 100", gotLimit, gotGC, tc.serveLimit)
			}
		})
	}
}
