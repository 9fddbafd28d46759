package main

import (
	"context"

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
