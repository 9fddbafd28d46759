package probe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DB is what the store writes through (internal/chstore.Store has it):
// one streaming INSERT into a table.
type DB interface {
	OpenInsert(ctx context.Context, table string, columns []string) (TableWriter, error)
}

// TableWriter is one open INSERT (the identical type
// internal/chstore.TableWriter names).
type TableWriter = interface {
	AppendColumns(cols ...any) error
	AppendRow(vals ...any) error
	Rows() int
	Flush() error
	Send() error
	Abort() error
}

// probeColumns are the probes columns Save appends, in its order.
var probeColumns = strings.Fields(`ts ts_ns probe_id round_id identity endpoint model kind stream marker
	target_tokens threshold_tokens threshold_node prompt_tokens completion_tokens http_status latency_ms
	finish_reason response_text error_text foreign_markers foreign_probe_ids verdict ingested_at`)

// Save writes results to the probes table.
func Save(ctx context.Context, db DB, rs []Result) error {
	if len(rs) == 0 {
		return nil
	}
	b, err := db.OpenInsert(ctx, "probes", probeColumns)
	if err != nil {
		return fmt.Errorf("probes: prepare insert: %w", err)
	}
	now := time.Now().UTC()
	for _, r := range rs {
		var stream uint8
		if r.Stream {
			stream = 1
		}
		if err := b.AppendRow(r.TS, uint64(r.TS.UnixNano()), r.ID, r.RoundID, r.Identity, r.Endpoint, r.Model, r.Kind, stream,
			r.Marker, r.TargetTokens, r.Threshold, r.ThresholdNode, r.PromptTokens, r.CompletionTokens, uint16(r.Status),
			uint32(min(r.Latency.Milliseconds(), 1<<31)), r.FinishReason, r.Text, r.Err, nonNil(r.ForeignMarkers),
			nonNil(r.ForeignProbes), r.Verdict, now); err != nil {
			_ = b.Abort()
			return fmt.Errorf("probes: append %s: %w", r.ID, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("probes: insert: %w", err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Metrics counts probes for /metrics.
type Metrics struct {
	Probes   *prometheus.CounterVec // kvtrail_probes_total{identity,kind,verdict}
	Tokens   *prometheus.CounterVec // kvtrail_probe_tokens_total{direction}
	Findings *prometheus.CounterVec // kvtrail_probe_findings_total{verdict}
}

// NewMetrics registers the probe counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Probes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvtrail_probes_total",
			Help: "Canary probe requests sent, by identity, kind and verdict."}, []string{"identity", "kind", "verdict"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvtrail_probe_tokens_total",
			Help: "Tokens the endpoint reported for canary probes (prompt, completion): what probing costs."}, []string{"direction"}),
		Findings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvtrail_probe_findings_total",
			Help: "Canary probes that found a leak or an over-limit prompt served."}, []string{"verdict"}),
	}
	reg.MustRegister(m.Probes, m.Tokens, m.Findings)
	return m
}

// Observe counts rs.
func (m *Metrics) Observe(rs []Result) {
	if m == nil {
		return
	}
	for _, r := range rs {
		m.Probes.WithLabelValues(r.Identity, r.Kind, r.Verdict).Inc()
		m.Tokens.WithLabelValues("prompt").Add(float64(r.PromptTokens))
		m.Tokens.WithLabelValues("completion").Add(float64(r.CompletionTokens))
		if r.Finding() {
			m.Findings.WithLabelValues(r.Verdict).Inc()
		}
	}
}
