package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/analyze/alert"
	"github.com/kvtrail/kvtrail/web"
)

// caseAnalyzer runs the analyzers for a case from the UI: the case's window,
// with runs and the affected list recorded under the case id.
type caseAnalyzer struct {
	db  analyze.Store
	cfg analyze.Config
	log *slog.Logger
}

func (c caseAnalyzer) AnalyzeCase(ctx context.Context, cs web.Case, user string) ([]string, error) {
	r := &analyze.Runner{DB: c.db, Cfg: c.cfg, Analyzers: analyze.All(c.cfg), Trigger: "case", CaseID: cs.ID, Log: c.log, Lean: true}
	rep, err := r.Run(ctx, analyze.Window{From: cs.From, To: cs.To}, nil)
	var ids []string
	if rep != nil {
		for _, run := range rep.Runs {
			ids = append(ids, run.Run.ID)
		}
	}
	c.log.Info("case analyzed", slog.String("case", cs.ID), slog.String("user", user), slog.Int("runs", len(ids)))
	return ids, err
}

// startAlerts runs live analysis while serving, if enabled. The returned
// func stops it and flushes queued Loki entries.
func (a *app) startAlerts(ctx context.Context, db analyze.Store, reg prometheus.Registerer) (func(), error) {
	cfg := a.cfg.Alerts
	if !cfg.Enabled {
		return func() {}, nil
	}
	findings, failures := alert.NewMetrics(reg)
	acfg := a.analyzeConfig()
	runner := &analyze.Runner{DB: db, Cfg: acfg, Analyzers: analyze.All(acfg), Trigger: analyze.TriggerLive, Live: true, Log: a.log}
	w := &alert.Watcher{
		Analyze: func(ctx context.Context, win analyze.Window) (*analyze.Report, error) {
			return runner.Run(ctx, win, nil)
		},
		Interval: cfg.Interval, Lookback: cfg.Lookback, Grouper: &alert.Grouper{Repeat: cfg.RepeatInterval},
		Findings: findings, Failures: failures, Log: a.log,
	}
	var stops []func()
	if cfg.LokiURL != "" {
		l, err := alert.NewLoki(cfg.LokiURL, cfg.LokiTenant, time.Second)
		if err != nil {
			return nil, err
		}
		w.Notifiers = append(w.Notifiers, l)
		stops = append(stops, l.Stop)
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvtrail_alert_loki_dropped_entries", Help: "Alert entries loki-client-go gave up delivering.",
		}, alert.DroppedEntries))
	}
	if u := cfg.WebhookURL.Reveal(); u != "" {
		w.Notifiers = append(w.Notifiers, &alert.Webhook{URL: u})
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(actx) }()
	a.log.Info("live analysis on", slog.Duration("interval", cfg.Interval), slog.Duration("lookback", cfg.Lookback), slog.Int("notifiers", len(w.Notifiers)))
	return func() {
		cancel()
		<-done
		for _, s := range stops {
			s()
		}
	}, nil
}
