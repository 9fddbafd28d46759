package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kvtrail/kvtrail/internal/chlocal"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/migrations"
)

// openStore connects to the configured ClickHouse, starts the managed
// local server when no address is configured, or opens the embedded engine
// (clickhouse.engine: embedded). The returned func closes the
// store and stops a managed server; call it exactly once.
func (a *app) openStore(ctx context.Context) (*chstore.Store, func(), error) {
	ch := a.cfg.ClickHouse
	if ch.Embedded() {
		return a.openEmbedded(ctx)
	}
	addrs := ch.Addrs()
	var srv *chlocal.Server
	if ch.Managed() {
		var err error
		srv, err = chlocal.Start(ctx, chlocal.Options{
			Binary:       a.cfg.Local.Binary,
			Dir:          a.cfg.Local.DataDir,
			StartTimeout: a.cfg.Local.StartTimeout,
		})
		if err != nil {
			return nil, nil, err
		}
		a.log.Info("started managed ClickHouse", slog.String("addr", srv.Addr), slog.String("dir", srv.Dir()), slog.Int("pid", srv.PID()))
		addrs = []string{srv.Addr}
	}
	s, err := chstore.Open(ctx, chstore.Options{
		Addrs:        addrs,
		Database:     ch.Database,
		Username:     ch.Username,
		Password:     ch.Password.Reveal(),
		DialTimeout:  ch.DialTimeout,
		ReadTimeout:  ch.ReadTimeout,
		MaxOpenConns: ch.MaxOpenConns,
		Cluster:      ch.Cluster,
		ShardMacro:   ch.ShardMacro,
		ReplicaMacro: ch.ReplicaMacro,
		InsertQuorum: ch.InsertQuorum,
		Compression:  ch.Compression,
	})
	if err != nil {
		if srv != nil {
			srv.Stop()
		}
		return nil, nil, err
	}
	a.chAddrs = addrs
	a.log.Debug("connected to ClickHouse", slog.String("version", s.ServerVersion().String()), slog.String("database", s.Database()))
	closeFn := func() {
		_ = s.Close()
		if srv != nil {
			srv.Stop()
			a.log.Info("stopped managed ClickHouse")
		}
	}
	return s, closeFn, nil
}

// migrate applies pending migrations and logs what it did.
func (a *app) migrate(ctx context.Context, s *chstore.Store) error {
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		return err
	}
	ran, err := m.Up(ctx)
	for _, mg := range ran {
		a.log.Info("applied migration", slog.String("migration", mg.Name))
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
