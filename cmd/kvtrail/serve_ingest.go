package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/web"
)

// mountIngest adds the push endpoints (Loki push protocol and NDJSON) to
// the router, backed by a ClickHouse sink with a durable spool, and starts
// the spool's drain loop. The returned func closes the spool.
func (a *app) mountIngest(ctx context.Context, r *gin.Engine, store ingest.Store, reg prometheus.Registerer) (func(), error) {
	cfg := a.cfg.Ingest
	sp, err := spool.Open(cfg.SpoolDir, cfg.SpoolMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("open spool %s: %w", cfg.SpoolDir, err)
	}
	for _, cut := range sp.Recovered() {
		a.log.Warn("spool recovery cut a torn record", slog.String("segment", cut.Segment), slog.Int64("bytes", cut.Bytes), slog.String("reason", cut.Reason))
	}
	sink := ingest.NewPushSink(store, sp, a.log)
	lim := push.Limits{MaxCompressedBytes: cfg.MaxBodyBytes, MaxDecompressedBytes: cfg.MaxDecompressedBytes}
	m := newPushMetrics(reg, sp)
	var guard []gin.HandlerFunc
	if cfg.RequireToken {
		auth, err := web.IngestAuth(a.cfg.Auth)
		if err != nil {
			_ = sp.Close()
			return nil, err
		}
		guard = append(guard, auth)
	} else {
		a.log.Warn("push endpoints accept anonymous pushes (ingest.require_token is false)")
	}
	r.POST("/loki/api/v1/push", append(guard, gin.WrapH(push.Handler(push.KindLoki, lim, sink, a.log, push.WithMetrics(m))))...)
	r.POST("/ingest/v1/lines", append(guard, gin.WrapH(push.Handler(push.KindNDJSON, lim, sink, a.log, push.WithMetrics(m))))...)
	go sink.RunDrain(ctx, cfg.FlushInterval*2)
	return func() { _ = sp.Close() }, nil
}

type pushMetrics struct {
	requests *prometheus.CounterVec
	entries  *prometheus.CounterVec
	bytes    *prometheus.CounterVec
}

func newPushMetrics(reg prometheus.Registerer, sp *spool.Spool) *pushMetrics {
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
	}
	reg.MustRegister(m.requests, m.entries, m.bytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvtrail_spool_bytes", Help: "Bytes waiting in the push spool."},
			func() float64 { return float64(sp.Size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvtrail_spool_records", Help: "Pushes waiting in the push spool."},
			func() float64 { return float64(sp.Len()) }))
	return m
}

func (m *pushMetrics) ObserveRequest(s push.RequestStats) {
	m.requests.WithLabelValues(s.Kind, strconv.Itoa(s.Status), s.Reason).Inc()
	if s.Status == 204 {
		m.entries.WithLabelValues(s.Kind).Add(float64(s.Entries))
	}
	m.bytes.WithLabelValues(s.Kind).Add(float64(s.DecompressedBytes))
}
