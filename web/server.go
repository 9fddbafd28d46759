// Package web is kvtrail's HTTP face: the JSON API, the server-rendered UI
// and the operational endpoints (/healthz, /readyz, /metrics). Gin is only
// the adapter: handlers bind input, call a domain package and map errors.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvtrail/kvtrail/internal/config"
)

// Pinger is what readiness needs from the database.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ShardPinger is a Pinger that knows the cluster behind it: it returns the
// unreachable hosts (ready, degraded) and an error when a whole shard is
// unreachable (not ready).
type ShardPinger interface {
	PingShards(ctx context.Context) ([]string, error)
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

	// Store is the store behind the UI and API (the ClickHouse adapter's
	// chstore.UIStore). Without it only the operational endpoints are
	// served.
	Store Store
	// Posture reads the fleet's posture for the fleet page (nil: the page
	// answers an error).
	Posture postureSource
	// Auth holds the users, tokens and session settings (config.Auth).
	Auth config.Auth
	// ExportDir receives export files (default ./var/exports).
	ExportDir string
	// Affected overrides where notification lists are read from (default:
	// the affected table through Store).
	Affected AffectedReader
	// Analyzer runs the analyzers for a case; nil hides the button.
	Analyzer CaseAnalyzer
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// ReadyChecks add to /readyz: each names a component, describes its
	// state (shown under its name) and says whether it is ready.
	ReadyChecks []ReadyCheck
}

// ReadyCheck reports one component's readiness for /readyz.
type ReadyCheck func() (name string, info any, ready bool)

// server holds the UI and API handlers' dependencies.
type server struct {
	log      *slog.Logger
	auth     *authenticator
	tmpl     map[string]*template.Template
	clock    *auditClock
	now      func() time.Time
	audits   auditStore
	searches searchStore
	requests requestStore
	findings findingStore
	overview overviewStore
	cases    caseStore
	affected AffectedReader
	analyzer CaseAnalyzer
	exports  *exporter
	charts   chartStore
	posture  postureSource
}

// New builds the router. It panics on a broken embedded template (a build
// defect); use NewServer to get the error instead.
func New(o Options) *gin.Engine {
	r, err := NewServer(o)
	if err != nil {
		panic(err)
	}
	return r
}

// NewServer builds the router.
func NewServer(o Options) (*gin.Engine, error) {
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
	r.Use(recovery(o.Logger), requestLog(o.Logger), m.middleware(), securityHeaders())
	// Ids in paths are escaped by the templates; match them undecoded so an
	// id holding "/" still reaches its route.
	r.UseRawPath, r.UnescapePathValues = true, true
	// Client addresses come from the connection, not X-Forwarded-For.
	if err := r.SetTrustedProxies(nil); err != nil {
		return nil, err
	}

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok", "version": o.Version}) })
	r.GET("/readyz", withReadyChecks(readyz(o.DB), o.ReadyChecks))
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{Registry: o.Registry})))
	if o.Store == nil {
		return r, nil
	}
	if err := mountUI(r, o); err != nil {
		return nil, err
	}
	return r, nil
}

// withReadyChecks runs the database check, then adds each extra check's
// state to the JSON answer; any unready check makes it 503.
func withReadyChecks(db gin.HandlerFunc, checks []ReadyCheck) gin.HandlerFunc {
	if len(checks) == 0 {
		return db
	}
	return func(c *gin.Context) {
		rec := &capture{ResponseWriter: c.Writer}
		c.Writer = rec
		db(c)
		c.Writer = rec.ResponseWriter
		body := gin.H{}
		_ = json.Unmarshal(rec.body.Bytes(), &body)
		code := rec.status
		for _, ch := range checks {
			name, info, ok := ch()
			body[name] = info
			if !ok {
				code = http.StatusServiceUnavailable
				body["status"] = "unavailable"
			}
		}
		c.JSON(code, body)
	}
}

// capture holds back a handler's answer so that it can be extended.
type capture struct {
	gin.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *capture) WriteHeader(code int)        { w.status = code }
func (w *capture) WriteHeaderNow()             {}
func (w *capture) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *capture) WriteString(s string) (int, error) {
	return w.body.WriteString(s)
}

func readyz(db Pinger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if db == nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "clickhouse": "not configured"})
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if sp, ok := db.(ShardPinger); ok {
			down, err := sp.PingShards(ctx)
			switch {
			case err != nil && len(down) == 0:
				c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "clickhouse": err.Error()})
			case err != nil:
				c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "clickhouse": err.Error(), "unreachable": down})
			case len(down) > 0:
				c.JSON(http.StatusOK, gin.H{"status": "degraded", "clickhouse": "ok", "unreachable": down})
			default:
				c.JSON(http.StatusOK, gin.H{"status": "ready", "clickhouse": "ok"})
			}
			return
		}
		if err := db.Ping(ctx); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "clickhouse": err.Error()})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready", "clickhouse": "ok"})
	}
}
