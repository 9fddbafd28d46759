package main

import (
	"context"
	"os"
	"runtime/debug"

	"github.com/kvtrail/kvtrail/internal/chstore"
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

// limitMemory applies memory_limit for commands whose memory should not
// grow with their input (ingest, serve, demo, bench ingest). Analysis is
// left alone: it holds its window in memory by design, and a soft limit
// below its live heap would only make the garbage collector run
// continuously. GOMEMLIMIT, when set, wins.
func (a *app) limitMemory() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && a.cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(a.cfg.MemoryLimit)
	}
}
