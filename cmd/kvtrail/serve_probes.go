package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/posture"
	"github.com/kvtrail/kvtrail/probe"
)

// newProber builds a prober from the probes config section.
func newProber(c config.Probes) (*probe.Prober, error) {
	var ids []probe.Identity
	for _, id := range c.Identities {
		ids = append(ids, probe.Identity{Name: id.Name, Key: id.APIKey.Reveal()})
	}
	return probe.New(probe.Config{Endpoint: c.Endpoint, Model: c.Model, Identities: ids, MaxTokens: c.MaxTokens,
		MaxPromptTokens: c.MaxPromptTokens, Margin: c.Margin, Timeout: c.Timeout})
}

// probeThresholds reads the PD prefill nodes' rejection thresholds from
// posture, unless long probes are off (max_prompt_tokens 0).
func probeThresholds(s *chstore.Store, c config.Probes) func(ctx context.Context) ([]probe.Threshold, error) {
	return func(ctx context.Context) ([]probe.Threshold, error) {
		if c.MaxPromptTokens == 0 {
			return nil, nil
		}
		f, err := posture.Load(ctx, s)
		if err != nil {
			return nil, err
		}
		return probe.Thresholds(f), nil
	}
}

// startProbes sends probe rounds while serving, if probes.enabled. Results
// go to the probes table (the canary_probe analyzer, and so live analysis
// and its notifiers, picks the findings up) and to /metrics.
func (a *app) startProbes(ctx context.Context, s *chstore.Store, reg prometheus.Registerer) (func(), error) {
	c := a.cfg.Probes
	if !c.Enabled {
		return func() {}, nil
	}
	p, err := newProber(c)
	if err != nil {
		return nil, err
	}
	sch := &probe.Scheduler{Prober: p, PerHour: c.PerHour, MinInterval: c.MinInterval,
		Thresholds: probeThresholds(s, c),
		Save:       func(ctx context.Context, rs []probe.Result) error { return probe.Save(ctx, s, rs) },
		Metrics:    probe.NewMetrics(reg), Log: a.log}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); sch.Run(pctx) }()
	a.log.Info("canary probes on", slog.String("endpoint", c.Endpoint), slog.Int("identities", len(c.Identities)),
		slog.Int("per_hour", c.PerHour))
	return func() { cancel(); <-done }, nil
}
