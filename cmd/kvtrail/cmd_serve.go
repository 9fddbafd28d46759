package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/web"
)

func newServeCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP server (API, UI, /healthz, /readyz, /metrics) until SIGINT or SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			a.limitMemory()
			s, closeFn, err := a.openMigrated(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			return a.serve(ctx, s, nil)
		},
	}
	c.Flags().String("addr", "", "listen address host:port (default 127.0.0.1:8080)")
	bindFlag(c.Flags().Lookup("addr"), "serve.addr")
	return c
}

// serve runs the HTTP server until ctx is cancelled, then shuts down
// gracefully. ready, if set, is called with the base URL once listening.
func (a *app) serve(ctx context.Context, s *chstore.Store, ready func(url string)) error {
	reg := prometheus.NewRegistry()
	pushReady := &ingestReady{}
	router, err := web.NewServer(web.Options{Logger: a.log, DB: s, Version: version, Registry: reg,
		Store: a.uiStore(s), Posture: storePosture{s}, Auth: a.cfg.Auth, ExportDir: a.cfg.Serve.ExportDir,
		Analyzer:    caseAnalyzer{db: s, cfg: a.analyzeConfig(), log: a.log},
		ReadyChecks: []web.ReadyCheck{pushReady.check}})
	if err != nil {
		return err
	}
	closeIngest, err := a.mountIngest(ctx, router, s, reg, pushReady)
	if err != nil {
		return err
	}
	defer closeIngest()
	stopAlerts, err := a.startAlerts(ctx, s, reg)
	if err != nil {
		return err
	}
	defer stopAlerts()
	stopProbes, err := a.startProbes(ctx, s, reg)
	if err != nil {
		return err
	}
	defer stopProbes()
	defer a.startRetention(ctx, s)()
	ln, err := net.Listen("tcp", a.cfg.Serve.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Serve.Addr, err)
	}
	srv := &http.Server{Handler: router, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	if a.embedded != nil {
		// Another kvtrail command on this embedded store is told to use
		// this URL instead.
		if err := a.embedded.SetURL(url); err != nil {
			a.log.Warn("could not record the URL in the embedded store's lock file", slog.Any("err", err))
		}
	}
	a.log.Info("serving", slog.String("url", url))
	if ready != nil {
		ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	a.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.Serve.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}
