// Package alert turns new findings into alerts while kvtrail serves: the
// analyzers run on an interval over a lookback window, findings no earlier
// run recorded are counted in /metrics, grouped by the condition they
// describe, and sent to Loki (loki-client-go) and an optional webhook. One
// ongoing condition is one alert, repeated only after a quiet period or
// when its severity rises.
package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvtrail/kvtrail/analyze"
)

// Alert is a group of new findings about one condition.
type Alert struct {
	GroupKey    string    `json:"group_key"`
	Analyzer    string    `json:"analyzer"`
	Severity    string    `json:"severity"`
	Node        string    `json:"node,omitempty"`
	Count       int       `json:"count"`
	FirstTS     time.Time `json:"first_ts"`
	LastTS      time.Time `json:"last_ts"`
	Title       string    `json:"title"`
	Explanation string    `json:"explanation"`
	Tenants     []string  `json:"tenants,omitempty"`
	// FindingIDs lists up to maxIDs of the group's finding ids.
	FindingIDs []string `json:"finding_ids"`
}

const maxIDs = 20

// Notifier delivers alerts. It is defined here, where it is used; Loki and
// webhook implementations live beside it.
type Notifier interface {
	Name() string
	Notify(ctx context.Context, alerts []Alert) error
}

// severityRank orders severities for escalation.
var severityRank = map[string]int{"NOTE": 0, "LOW": 1, "MEDIUM": 2, "HIGH": 3}

// Grouper folds findings into alerts and suppresses repeats of a condition
// already alerted within Repeat, unless its severity rose.
type Grouper struct {
	Repeat time.Duration
	sent   map[string]sentState
}

type sentState struct {
	at       time.Time
	severity string
}

// Group returns the alerts to send now for the new findings fs.
func (g *Grouper) Group(now time.Time, fs []analyze.Finding) []Alert {
	if g.sent == nil {
		g.sent = map[string]sentState{}
	}
	groups := map[string]*Alert{}
	tenants := map[string]map[string]bool{}
	var order []string
	for _, f := range fs {
		key := f.Analyzer + "/" + f.GroupKey
		if f.GroupKey == "" {
			key = f.Analyzer + "/" + f.ID
		}
		a := groups[key]
		if a == nil {
			a = &Alert{GroupKey: key, Analyzer: f.Analyzer, Severity: string(f.Severity), Node: node(f),
				FirstTS: f.TS, LastTS: f.TS, Title: f.Title, Explanation: f.Explanation}
			groups[key] = a
			tenants[key] = map[string]bool{}
			order = append(order, key)
		}
		a.Count++
		if severityRank[string(f.Severity)] > severityRank[a.Severity] {
			a.Severity, a.Title, a.Explanation = string(f.Severity), f.Title, f.Explanation
		}
		if f.TS.Before(a.FirstTS) {
			a.FirstTS = f.TS
		}
		if f.TS.After(a.LastTS) {
			a.LastTS = f.TS
		}
		if f.Tenant != "" {
			tenants[key][f.Tenant] = true
		}
		if len(a.FindingIDs) < maxIDs {
			a.FindingIDs = append(a.FindingIDs, f.ID)
		}
	}
	sort.Strings(order)
	var out []Alert
	for _, key := range order {
		a := groups[key]
		for t := range tenants[key] {
			a.Tenants = append(a.Tenants, t)
		}
		sort.Strings(a.Tenants)
		prev, seen := g.sent[key]
		if seen && now.Sub(prev.at) < g.Repeat && severityRank[a.Severity] <= severityRank[prev.severity] {
			continue // the same condition, already alerted, not worse
		}
		g.sent[key] = sentState{at: now, severity: a.Severity}
		out = append(out, *a)
	}
	// Forget old groups so the map does not grow without bound.
	for k, s := range g.sent {
		if now.Sub(s.at) > 2*g.Repeat {
			delete(g.sent, k)
		}
	}
	return out
}

func node(f analyze.Finding) string {
	if f.DecodeNode != "" {
		return f.DecodeNode
	}
	return f.PrefillNode
}

// Watcher runs analyzers continuously and sends alerts for new findings.
type Watcher struct {
	// Analyze runs the analyzers over a window (an analyze.Runner's Run).
	Analyze   func(ctx context.Context, w analyze.Window) (*analyze.Report, error)
	Interval  time.Duration
	Lookback  time.Duration
	Grouper   *Grouper
	Notifiers []Notifier
	// Findings counts new findings: kvtrail_findings_total{analyzer,severity}.
	Findings *prometheus.CounterVec
	// Failures counts failed rounds and deliveries by stage.
	Failures *prometheus.CounterVec
	Log      *slog.Logger
	Now      func() time.Time
}

// NewMetrics registers the watcher's counters.
func NewMetrics(reg prometheus.Registerer) (findings, failures *prometheus.CounterVec) {
	findings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvtrail_findings_total", Help: "New findings by analyzer and severity, as the live analysis records them.",
	}, []string{"analyzer", "severity"})
	failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvtrail_alert_failures_total", Help: "Failed live-analysis rounds and alert deliveries, by stage.",
	}, []string{"stage"})
	reg.MustRegister(findings, failures)
	// Every series exists from the start, at 0: a dashboard or an alert
	// rule on rate(kvtrail_findings_total) must see "none yet", not "no
	// such metric".
	for _, a := range analyze.Names() {
		for _, s := range analyze.Severities {
			findings.WithLabelValues(a, string(s))
		}
	}
	return findings, failures
}

// Tick runs one round: analyze [now-Lookback, now), count, group, notify.
// It returns the alerts it tried to send.
func (w *Watcher) Tick(ctx context.Context) ([]Alert, error) {
	now := time.Now().UTC()
	if w.Now != nil {
		now = w.Now().UTC()
	}
	rep, err := w.Analyze(ctx, analyze.Window{From: now.Add(-w.Lookback), To: now})
	if err != nil {
		w.fail("analyze")
		return nil, fmt.Errorf("live analysis: %w", err)
	}
	var fresh []analyze.Finding
	for _, r := range rep.Runs {
		for _, f := range r.New {
			if w.Findings != nil {
				w.Findings.WithLabelValues(f.Analyzer, string(f.Severity)).Inc()
			}
			fresh = append(fresh, f)
		}
	}
	alerts := w.Grouper.Group(now, fresh)
	if len(alerts) == 0 {
		return nil, nil
	}
	var errs []error
	for _, n := range w.Notifiers {
		if err := n.Notify(ctx, alerts); err != nil {
			w.fail("notify_" + n.Name())
			errs = append(errs, fmt.Errorf("%s: %w", n.Name(), err))
		}
	}
	w.logger().Info("alerts sent", slog.Int("alerts", len(alerts)), slog.Int("new_findings", len(fresh)))
	return alerts, errors.Join(errs...)
}

// Run ticks every Interval until ctx ends. Failures are logged and counted;
// the next round tries again.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		if _, err := w.Tick(ctx); err != nil && ctx.Err() == nil {
			w.logger().Warn("live analysis round failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *Watcher) fail(stage string) {
	if w.Failures != nil {
		w.Failures.WithLabelValues(stage).Inc()
	}
}

func (w *Watcher) logger() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}
