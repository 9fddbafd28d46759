package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
)

// retentionEvery is how often serve applies retention.keep. Partitions are
// weeks, so a few runs a day drop each one within hours of expiring.
const retentionEvery = 6 * time.Hour

// startRetention applies retention.keep while serving (nothing when it is
// 0), first a minute after start so a restart loop cannot hammer the
// server. Several kvtrail instances may run it: dropping an absent
// partition or setting the same TTL again is harmless.
func (a *app) startRetention(ctx context.Context, s *chstore.Store) func() {
	keep := a.cfg.Retention.Keep
	if keep <= 0 {
		return func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := time.Minute
		for {
			select {
			case <-rctx.Done():
				return
			case <-time.After(wait):
			}
			wait = retentionEvery
			res, err := s.ApplyRetention(rctx, keep, time.Now(), false)
			if err != nil {
				a.log.Warn("retention failed", slog.String("error", err.Error()))
				continue
			}
			a.log.Info("retention applied", slog.Time("cutoff", res.Cutoff), slog.Int("dropped_partitions", len(res.Dropped)),
				slog.Int("held_partitions", len(res.Held)), slog.Int("ttl_statements", len(res.TTL)))
		}
	}()
	return func() { cancel(); <-done }
}
