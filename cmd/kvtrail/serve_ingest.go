package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvtrail/kvtrail/analyze/alert"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/web"
)

// ingestReady is /readyz's view of the push spool; mountIngest fills it in
// after the router (and its /readyz) exists.
type ingestReady struct {
	sink     atomic.Pointer[ingest.PushSink]
	maxBytes int64
}

// spoolNearlyFull is the fill ratio at which /readyz turns 503, so that a
// load balancer sends pushes elsewhere before they are refused.
const spoolNearlyFull = 0.9

func (r *ingestReady) check() (string, any, bool) {
	s := r.sink.Load()
	if s == nil {
		return "spool", gin.H{"status": "not mounted"}, true
	}
	st := s.Stats()
	fill := 0.0
	if r.maxBytes > 0 {
		fill = float64(st.SpoolBytes) / float64(r.maxBytes)
	}
	state := "empty"
	switch {
	case fill >= spoolNearlyFull:
		state = "nearly full"
	case st.SpoolRecords > 0:
		state = "draining"
	}
	return "spool", gin.H{"status": state, "records": st.SpoolRecords, "bytes": st.SpoolBytes, "fill": fill,
		"drain_lag_seconds": st.DrainLagSeconds, "dead_letter_records": st.DeadLetterRecords}, fill < spoolNearlyFull
}

// mountIngest adds the push endpoints (Loki push protocol and NDJSON) to
// the router, backed by a ClickHouse sink whose spool is the write-ahead
// log of every push, and starts the spool's drain loop. The returned func
// closes the spools.
func (a *app) mountIngest(ctx context.Context, r *gin.Engine, store ingest.Store, reg prometheus.Registerer, ready *ingestReady) (func(), error) {
	cfg := a.cfg.Ingest
	sp, err := spool.Open(cfg.SpoolDir, cfg.SpoolMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("open spool %s: %w", cfg.SpoolDir, err)
	}
	for _, cut := range sp.Recovered() {
		a.log.Warn("spool recovery cut a torn record", slog.String("segment", cut.Segment), slog.Int64("bytes", cut.Bytes), slog.String("reason", cut.Reason))
	}
	// The dead letter lives inside the spool directory (the spool only
	// reads its own segment files) and has the same bound.
	dead, err := spool.Open(filepath.Join(cfg.SpoolDir, "dead-letter"), cfg.SpoolMaxBytes)
	if err != nil {
		_ = sp.Close()
		return nil, fmt.Errorf("open dead letter: %w", err)
	}
	closeAll := func() { _ = sp.Close(); _ = dead.Close() }
	if n := dead.Len(); n > 0 {
		a.log.Warn("the push dead letter holds pushes that could not be stored", slog.Int("records", n))
	}
	sink := ingest.NewPushSink(store, sp, a.log, ingest.WithDeadLetter(dead), ingest.WithQuarantineHook(a.quarantineAlert(ctx)))
	budget := push.NewBudget(inflightBound(cfg.MaxInflightBytes, cfg.MaxDecompressedBytes, a.cfg.MemoryLimit))
	lim := push.Limits{MaxCompressedBytes: cfg.MaxBodyBytes, MaxDecompressedBytes: cfg.MaxDecompressedBytes}
	m := newPushMetrics(reg, sink, budget)
	var guard []gin.HandlerFunc
	if cfg.RequireToken {
		auth, err := web.IngestAuth(a.cfg.Auth)
		if err != nil {
			closeAll()
			return nil, err
		}
		guard = append(guard, auth)
	} else {
		a.log.Warn("push endpoints accept anonymous pushes (ingest.require_token is false)")
	}
	opts := []push.Option{push.WithMetrics(m), push.WithBudget(budget)}
	r.POST("/loki/api/v1/push", append(guard, gin.WrapH(push.Handler(push.KindLoki, lim, sink, a.log, opts...)))...)
	r.POST("/ingest/v1/lines", append(guard, gin.WrapH(push.Handler(push.KindNDJSON, lim, sink, a.log, opts...)))...)
	// The spool's state, the drain lag and the quarantined pushes, for the
	// pushing side (an ingester or admin token).
	r.GET("/ingest/v1/status", append(guard, func(c *gin.Context) { c.JSON(http.StatusOK, sink.Stats()) })...)
	r.POST("/ingest/v1/dead-letter/requeue", append(guard, func(c *gin.Context) {
		n, err := sink.Requeue(c.Request.Context(), dead)
		if err != nil {
			a.log.Error("dead letter requeue", slog.String("error", err.Error()), slog.Int("requeued", n))
			c.JSON(http.StatusInternalServerError, gin.H{"requeued": n, "error": "requeue stopped; see the server log"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"requeued": n})
	})...)
	if ready != nil {
		ready.maxBytes = cfg.SpoolMaxBytes
		ready.sink.Store(sink)
	}
	go sink.RunDrain(ctx, cfg.FlushInterval)
	return closeAll, nil
}

// quarantineAlert sends an alert to the alert webhook (alerts.enabled,
// alerts.webhook_url) for every quarantined push. The reason is not sent:
// it may quote a ClickHouse error, which may quote the data; it is in the
// log and in GET /ingest/v1/status.
func (a *app) quarantineAlert(ctx context.Context) func(ingest.Quarantined) {
	u := a.cfg.Alerts.WebhookURL.Reveal()
	if !a.cfg.Alerts.Enabled || u == "" {
		return nil
	}
	wh := &alert.Webhook{URL: u}
	return func(q ingest.Quarantined) {
		al := alert.Alert{GroupKey: "push_quarantine", Analyzer: "push_quarantine", Severity: "HIGH", Count: 1,
			FirstTS: q.Time, LastTS: q.Time, Title: "A spooled push could not be stored and was quarantined",
			Explanation: fmt.Sprintf("%d entries from %s were moved to the push dead letter; see GET /ingest/v1/status, "+
				"and POST /ingest/v1/dead-letter/requeue once the cause is fixed.", q.Entries, strings.Join(q.Streams, " "))}
		go func() {
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := wh.Notify(nctx, []alert.Alert{al}); err != nil {
				a.log.Warn("quarantine alert not delivered", slog.String("error", err.Error()))
			}
		}()
	}
}

// inflightBound is ingest.max_inflight_bytes, or when 0 the larger of one
// largest body and half the memory limit.
func inflightBound(set, maxBody, memLimit int64) int64 {
	if set > 0 {
		return set
	}
	if memLimit <= 0 {
		return 4 * maxBody
	}
	return max(maxBody, memLimit/2)
}

type pushMetrics struct {
	requests *prometheus.CounterVec
	entries  *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newPushMetrics(reg prometheus.Registerer, sink *ingest.PushSink, budget *push.Budget) *pushMetrics {
	m := &pushMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvtrail_push_requests_total", Help: "Push requests by endpoint kind, HTTP status and reason.",
		}, []string{"kind", "status", "reason"}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvtrail_push_entries_total", Help: "Log entries accepted by push endpoints.",
		}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvtrail_push_bytes_total", Help: "Decompressed push body bytes.",
		}, []string{"kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvtrail_push_duration_seconds", Help: "Time to answer a push request.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
	}
	gauge := func(name, help string, f func(ingest.PushStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(sink.Stats()) })
	}
	counter := func(name, help string, f func(ingest.PushStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(sink.Stats()) })
	}
	reg.MustRegister(m.requests, m.entries, m.bytes, m.latency,
		gauge("kvtrail_spool_bytes", "Bytes waiting in the push spool.", func(s ingest.PushStats) float64 { return float64(s.SpoolBytes) }),
		gauge("kvtrail_spool_records", "Pushes waiting in the push spool.", func(s ingest.PushStats) float64 { return float64(s.SpoolRecords) }),
		gauge("kvtrail_spool_drain_lag_seconds", "Age of the oldest acknowledged push not yet in ClickHouse (0 when the spool is empty).",
			func(s ingest.PushStats) float64 { return s.DrainLagSeconds }),
		counter("kvtrail_spool_drained_pushes_total", "Pushes the drain stored in ClickHouse.", func(s ingest.PushStats) float64 { return float64(s.Drained) }),
		counter("kvtrail_spool_drained_lines_total", "Lines the drain stored in ClickHouse.", func(s ingest.PushStats) float64 { return float64(s.DrainedLines) }),
		counter("kvtrail_spool_quarantined_total", "Spooled pushes moved to the dead letter because they could not be stored.",
			func(s ingest.PushStats) float64 { return float64(s.Quarantined) }),
		gauge("kvtrail_spool_dead_letter_records", "Pushes kept in the dead letter.", func(s ingest.PushStats) float64 { return float64(s.DeadLetterRecords) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvtrail_push_inflight_bytes", Help: "Decompressed push bytes held by requests being handled."},
			func() float64 { n, _ := budget.InUse(); return float64(n) }),
	)
	return m
}

func (m *pushMetrics) ObserveRequest(s push.RequestStats) {
	m.requests.WithLabelValues(s.Kind, strconv.Itoa(s.Status), s.Reason).Inc()
	m.latency.WithLabelValues(s.Kind).Observe(s.Duration.Seconds())
	if s.Status == 204 {
		m.entries.WithLabelValues(s.Kind).Add(float64(s.Entries))
	}
	m.bytes.WithLabelValues(s.Kind).Add(float64(s.DecompressedBytes))
}
