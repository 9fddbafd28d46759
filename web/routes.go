package web

import (
	"embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

//go:embed openapi.yaml
var openapiFS embed.FS

// Route is one UI or API route with the permission it needs; the OpenAPI
// test checks every /api/v1 route here is documented.
type Route struct {
	Method, Path string
	Perm         perm
	handler      func(*server) gin.HandlerFunc
}

// apiRoutes and pageRoutes are the whole authenticated surface.
func apiRoutes() []Route {
	h := func(f func(*server, *gin.Context)) func(*server) gin.HandlerFunc {
		return func(s *server) gin.HandlerFunc { return func(c *gin.Context) { f(s, c) } }
	}
	return []Route{
		{"GET", "/api/v1/me", permRead, h((*server).me)},
		{"GET", "/api/v1/overview", permRead, h((*server).overviewPage)},
		{"GET", "/api/v1/requests", permRead, h((*server).search)},
		{"GET", "/api/v1/requests/:id", permRead, h((*server).requestView)},
		{"GET", "/api/v1/evidence/:id", permRead, h((*server).evidence)},
		{"GET", "/api/v1/findings", permRead, h((*server).findingsList)},
		{"GET", "/api/v1/findings/:id", permRead, h((*server).findingDetail)},
		{"GET", "/api/v1/cases", permRead, h((*server).casesList)},
		{"POST", "/api/v1/cases", permCaseWrite, h((*server).caseCreate)},
		{"GET", "/api/v1/cases/:id", permRead, h((*server).caseView)},
		{"PUT", "/api/v1/cases/:id", permCaseWrite, h((*server).caseUpdate)},
		{"GET", "/api/v1/cases/:id/affected", permRead, h((*server).caseAffected)},
		{"GET", "/api/v1/cases/:id/tenants/:tenant", permRead, h((*server).caseTenant)},
		{"POST", "/api/v1/cases/:id/hold", permCaseWrite, h((*server).caseHold)},
		// Releasing a hold is an admin's act (permAudit is admin-only).
		{"POST", "/api/v1/cases/:id/release", permAudit, h((*server).caseRelease)},
		{"POST", "/api/v1/cases/:id/analyze", permCaseWrite, h((*server).caseAnalyze)},
		{"GET", "/api/v1/cases/:id/exports", permExport, h((*server).caseExports)},
		{"POST", "/api/v1/cases/:id/exports", permExport, h((*server).exportCreate)},
		{"GET", "/api/v1/exports/:id", permExport, h((*server).exportView)},
		{"GET", "/api/v1/exports/:id/files/*name", permExport, h((*server).exportFile)},
		{"GET", "/api/v1/audit", permAudit, h((*server).auditList)},
		{"GET", "/api/v1/posture", permRead, h((*server).fleetPage)},
	}
}

func pageRoutes() []Route {
	h := func(f func(*server, *gin.Context)) func(*server) gin.HandlerFunc {
		return func(s *server) gin.HandlerFunc { return func(c *gin.Context) { f(s, c) } }
	}
	return []Route{
		{"GET", "/", permRead, h((*server).overviewPage)},
		{"GET", "/search", permRead, h((*server).search)},
		{"GET", "/requests/:id", permRead, h((*server).requestView)},
		{"GET", "/evidence/:id", permRead, h((*server).evidence)},
		{"GET", "/findings", permRead, h((*server).findingsList)},
		{"GET", "/findings/:id", permRead, h((*server).findingDetail)},
		{"GET", "/cases", permRead, h((*server).casesList)},
		{"POST", "/cases", permCaseWrite, h((*server).caseCreate)},
		{"GET", "/cases/:id", permRead, h((*server).caseView)},
		{"POST", "/cases/:id", permCaseWrite, h((*server).caseUpdate)},
		{"GET", "/cases/:id/tenants/:tenant", permRead, h((*server).caseTenant)},
		{"POST", "/cases/:id/hold", permCaseWrite, h((*server).caseHold)},
		{"POST", "/cases/:id/release", permAudit, h((*server).caseRelease)},
		{"POST", "/cases/:id/analyze", permCaseWrite, h((*server).caseAnalyze)},
		{"POST", "/cases/:id/exports", permExport, h((*server).exportCreate)},
		{"GET", "/exports/:id", permExport, h((*server).exportView)},
		{"GET", "/exports/:id/files/*name", permExport, h((*server).exportFile)},
		{"GET", "/admin/audit", permAudit, h((*server).auditList)},
		{"POST", "/logout", permRead, h((*server).logout)},
		{"GET", "/fleet", permRead, h((*server).fleetPage)},
	}
}

func mountUI(r *gin.Engine, o Options) error {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	a, err := newAuthenticator(o.Auth, now)
	if err != nil {
		return err
	}
	a.sessions = o.Store
	tmpl, err := parseTemplates()
	if err != nil {
		return err
	}
	st := o.Store
	affected := o.Affected
	if affected == nil {
		affected = st
	}
	dir := o.ExportDir
	if dir == "" {
		dir = "./var/exports"
	}
	s := &server{
		log: o.Logger, auth: a, tmpl: tmpl, clock: &auditClock{now: now}, now: now,
		audits: st, searches: st, requests: st, findings: st, overview: st, cases: st, affected: affected, analyzer: o.Analyzer, charts: st, posture: o.Posture,
		exports: &exporter{dir: dir, store: st, affected: affected, versions: st, log: o.Logger, version: o.Version, now: now,
			sem: make(chan struct{}, maxRunningExport), progress: map[string]*[2]uint64{}},
	}
	if len(o.Auth.Users) == 0 && len(o.Auth.Tokens) == 0 {
		o.Logger.Warn("auth has no users or tokens: nobody can log in to the UI or API (see auth in kvtrail.example.yaml)")
	}
	if o.Auth.SessionKey == "" {
		o.Logger.Info("auth.session_key is empty: sessions use a random per-process key and end on restart")
	}

	r.StaticFS("/static", http.FS(staticFiles()))
	r.GET("/api/v1/openapi.yaml", func(c *gin.Context) {
		b, _ := openapiFS.ReadFile("openapi.yaml")
		c.Data(http.StatusOK, "application/yaml; charset=utf-8", b)
	})
	r.GET("/login", s.loginForm)
	r.POST("/login", s.loginSubmit)
	r.GET("/favicon.ico", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, "/static/favicon.svg") })
	// A 404 carries the navigation when the visitor is logged in, so a
	// stale link is not a dead end.
	r.NoRoute(func(c *gin.Context) {
		if ck, err := c.Cookie(sessionCookie); err == nil {
			if p, ok := s.auth.decodeSession(ck); ok {
				c.Set(principalKey, p)
			}
		}
		s.renderError(c, http.StatusNotFound, "There is no page at this address. Use the navigation above, or search for the request.")
	})

	authed := r.Group("/", s.authenticate(), s.csrf())
	for _, rt := range append(apiRoutes(), pageRoutes()...) {
		authed.Handle(rt.Method, rt.Path, s.require(rt.Perm), rt.handler(s))
	}
	o.Logger.Debug("ui mounted", slog.String("export_dir", dir))
	return nil
}
