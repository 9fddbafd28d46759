package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// findingStore is what the findings pages need.
type findingStore interface {
	ListFindings(ctx context.Context, q FindingQuery) (FindingPage, error)
	Finding(ctx context.Context, id string) (*FindingDetail, error)
}

type findingsView struct {
	FindingPage
	Links pageLinks `json:"-"`
}

func (s *server) findingsList(c *gin.Context) {
	q := FindingQuery{Analyzer: c.Query("analyzer"), Severity: c.Query("severity"), RunID: c.Query("run_id"),
		Tenant: c.Query("tenant"), Cursor: c.Query("cursor"), Limit: pageLimit(c, 50)}
	for _, v := range []string{q.Analyzer, q.Severity, q.RunID, q.Tenant, q.Cursor} {
		if !validUTF8Param(v) {
			s.fail(c, invalid("a filter is not valid UTF-8 or is too long"))
			return
		}
	}
	var err error
	// Confidence is shown in percent, so it is entered in percent too.
	if v := strings.TrimSuffix(strings.TrimSpace(c.Query("min_confidence")), "%"); v != "" {
		pct, err := strconv.ParseFloat(v, 64)
		if err != nil || pct < 0 || pct > 100 {
			s.fail(c, invalid("min_confidence is a percentage between 0 and 100"))
			return
		}
		q.MinConfidence = pct / 100
	}
	if q.From, err = parseTime(c.Query("from")); err != nil {
		s.fail(c, err)
		return
	}
	if q.To, err = parseTime(c.Query("to")); err != nil {
		s.fail(c, err)
		return
	}
	page, err := s.findings.ListFindings(c.Request.Context(), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "findings_search", map[string]any{"analyzer": q.Analyzer, "severity": q.Severity,
		"min_confidence": q.MinConfidence, "run_id": q.RunID, "tenant": q.Tenant, "cursor": q.Cursor}, int64(page.Total), http.StatusOK) {
		return
	}
	v := findingsView{FindingPage: page, Links: pager(c, "/findings", page.Next)}
	s.respond(c, "findings", "Findings", v)
}

func (s *server) findingDetail(c *gin.Context) {
	id := c.Param("id")
	d, err := s.findings.Finding(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "finding_view", map[string]any{"finding_id": id}, 1, http.StatusOK) {
		return
	}
	s.respond(c, "finding", "Finding", d)
}
