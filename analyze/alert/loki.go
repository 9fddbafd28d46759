package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/grafana/loki-client-go/loki"
	"github.com/grafana/loki-client-go/pkg/backoff"
	"github.com/grafana/loki-client-go/pkg/urlutil"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
)

// Loki sends alerts to a Loki push endpoint with loki-client-go, one JSON
// line per alert under the labels {source="kvtrail", analyzer, severity,
// node}. The client batches asynchronously and, after its retries, drops
// a batch; DroppedEntries reports how many it dropped so far.
type Loki struct {
	client *loki.Client
}

// NewLoki connects to pushURL (http://loki:3100/loki/api/v1/push).
func NewLoki(pushURL, tenant string, batchWait time.Duration) (*Loki, error) {
	u, err := url.Parse(pushURL)
	if err != nil {
		return nil, fmt.Errorf("loki url: %w", err)
	}
	if batchWait <= 0 {
		batchWait = time.Second
	}
	c, err := loki.New(loki.Config{
		URL:           urlutil.URLValue{URL: u},
		BatchWait:     batchWait,
		BatchSize:     1 << 20,
		Timeout:       10 * time.Second,
		BackoffConfig: backoff.BackoffConfig{MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second, MaxRetries: 10},
		TenantID:      tenant,
	})
	if err != nil {
		return nil, fmt.Errorf("loki client: %w", err)
	}
	return &Loki{client: c}, nil
}

// Name implements Notifier.
func (l *Loki) Name() string { return "loki" }

// Notify queues the alerts; delivery is asynchronous.
func (l *Loki) Notify(_ context.Context, alerts []Alert) error {
	for _, a := range alerts {
		line, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode alert: %w", err)
		}
		ls := model.LabelSet{"source": "kvtrail", "analyzer": model.LabelValue(a.Analyzer), "severity": model.LabelValue(a.Severity)}
		if a.Node != "" {
			ls["node"] = model.LabelValue(a.Node)
		}
		if err := l.client.Handle(ls, a.LastTS, string(line)); err != nil {
			return fmt.Errorf("queue alert: %w", err)
		}
	}
	return nil
}

// Stop flushes queued alerts and stops the client.
func (l *Loki) Stop() { l.client.Stop() }

// DroppedEntries is the number of entries loki-client-go has given up on
// in this process (its promtail_dropped_entries_total, which it registers
// in the global registry).
func DroppedEntries() float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "promtail_dropped_entries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
