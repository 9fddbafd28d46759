package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/internal/chdbstore"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

// openEmbedded opens the embedded engine (clickhouse.engine: embedded):
// ClickHouse 26.7 from libchdb.so inside this process, its data in
// local.embedded_dir. The directory is locked first, so a second kvtrail
// process on it stops with a Conflict naming the holder (and the URL of a
// serving one) before anything is opened. The returned func closes the
// store, the engine and the lock; call it exactly once.
func (a *app) openEmbedded(ctx context.Context) (*chstore.Store, func(), error) {
	ch := a.cfg.ClickHouse
	dir, err := filepath.Abs(a.cfg.Local.EmbeddedDir)
	if err != nil {
		return nil, nil, fmt.Errorf("local.embedded_dir: %w", err)
	}
	lock, err := chdbstore.Acquire(dir, chdbstore.Holder{
		PID: os.Getpid(), Command: strings.TrimPrefix(a.command, "kvtrail "), Started: time.Now().UTC()})
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*chstore.Store, func(), error) {
		lock.Release()
		return nil, nil, err
	}
	lib, err := chdbstore.FindLibrary(a.cfg.Local.ChdbLibrary)
	if err != nil {
		return fail(err)
	}
	if err := chdbstore.LoadLibrary(lib); err != nil {
		return fail(err)
	}
	start := time.Now()
	eng, err := chdbstore.OpenEngine(dir)
	if err != nil {
		return fail(err)
	}
	h, err := eng.Open(ch.Database)
	if err != nil {
		eng.Close()
		return fail(err)
	}
	s, err := chstore.OpenConn(h.Conn(), eng.Version(), chstore.Options{Database: ch.Database, MaxOpenConns: ch.MaxOpenConns})
	if err != nil {
		eng.Close()
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		eng.Close()
		return fail(err)
	}
	a.embedded = lock
	a.log.Info("opened the embedded ClickHouse", slog.String("version", eng.Version().String()), slog.String("dir", dir),
		slog.String("library", lib), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return s, func() {
		_ = s.Close()
		eng.Close()
		a.embedded = nil
		lock.Release()
	}, nil
}

// dataRoot is the directory that holds kvtrail's local state for the
// configured engine (the demo's simulated incident goes next to it).
func (a *app) dataRoot() string {
	if a.cfg.ClickHouse.Embedded() {
		return filepath.Dir(a.cfg.Local.EmbeddedDir)
	}
	return filepath.Dir(a.cfg.Local.DataDir)
}
