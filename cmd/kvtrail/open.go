package main

import (
	"context"
	"os"
	"runtime/debug"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/memlimit"
)

// openMigrated opens the store (starting the managed ClickHouse if needed)
// and applies pending migrations: what every command that reads or writes
// kvtrail's tables needs first. The returned func closes it all.
func (a *app) openMigrated(ctx context.Context) (*chstore.Store, func(), error) {
	s, closeFn, err := a.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := a.migrate(ctx, s); err != nil {
		closeFn()
		return nil, nil, err
	}
	return s, closeFn, nil
}

// limitMemory applies memory_limit as a fixed soft limit for the
// commands that serve (serve, demo, bench push): their memory must not
// grow with what clients send, and a limit the live heap cannot push up
// holds RSS near it at the collector's expense (the push budget bounds
// what pushes hold at once; TestPushMemoryIsBoundedAcrossRequests).
// Analysis is left alone: it holds its window in memory by design and
// runs under analyze.memory_limit_mb. GOMEMLIMIT, when set, wins.
func (a *app) limitMemory() {
	if lim := a.memoryLimit(); lim > 0 {
		debug.SetMemoryLimit(lim)
	}
}

// governMemory applies memory_limit to a bulk ingest (ingest, bench
// ingest) and returns what ends it. Its live heap is bounded by design
// (rows stream to the server), so the limit is the collector's only
// trigger (GOGC off, as in analysis: internal/memlimit): under GOGC=100 a
// live heap well below the limit was collected at every doubling anyway,
// and an ingest at scale 10 (9.1M records) took 3-7% more user CPU for
// the same peak RSS (docs/performance.md, "Ingest throughput").
// GOMEMLIMIT, when set, wins, and the GOGC variable, when set, stands.
func (a *app) governMemory() (stop func()) {
	lim := a.memoryLimit()
	if lim <= 0 {
		return func() {}
	}
	return memlimit.Start(lim).Stop
}

// memoryLimit is the limit limitMemory and governMemory apply:
// memory_limit, unless GOMEMLIMIT is set (softLimit).
func (a *app) memoryLimit() int64 { return softLimit(a.cfg.MemoryLimit) }

// softLimit is a configured soft memory limit in bytes as kvtrail applies
// it: none (0) when it is not positive or GOMEMLIMIT is set (the runtime
// applied that one at start, and it wins; empty, as for the runtime, is
// unset).
func softLimit(bytes int64) int64 {
	if os.Getenv("GOMEMLIMIT") != "" || bytes <= 0 {
		return 0
	}
	return bytes
}
