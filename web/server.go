// Package web is kvtrail's HTTP face: the JSON API, the server-rendered UI
// and the operational endpoints (/healthz, /readyz, /metrics). Gin is only
// the adapter: handlers bind input, call a domain package and map errors.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pinger is what readiness needs from the database.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Options wires the server's dependencies.
type Options struct {
	Logger *slog.Logger
	DB     Pinger
	// Registry receives kvtrail's metrics; a fresh one is made if nil. It is
	// kvtrail's own registry, never the global default, so libraries that
	// register globals (loki-client-go does) cannot collide with it.
	Registry *prometheus.Registry
	Version  string
}

// New builds the router.
func New(o Options) *gin.Engine {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newHTTPMetrics(o.Registry)

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(recovery(o.Logger), requestLog(o.Logger), m.middleware())

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok", "version": o.Version}) })
	r.GET("/readyz", readyz(o.DB))
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{Registry: o.Registry})))
	return r
}

func readyz(db Pinger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if db == nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "clickhouse": "not configured"})
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "clickhouse": err.Error()})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready", "clickhouse": "ok"})
	}
}
