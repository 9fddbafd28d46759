package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kvtrail/kvtrail/domain"
)

// searchStore is what the search page needs.
type searchStore interface {
	SearchRequests(ctx context.Context, q SearchQuery) (SearchPage, error)
}

func parseSearch(c *gin.Context) (SearchQuery, error) {
	q := SearchQuery{
		RequestID: c.Query("request_id"), RID: c.Query("rid"), Tenant: c.Query("tenant"), Node: c.Query("node"),
		Status: c.Query("status"), Sort: c.DefaultQuery("sort", "ts_desc"), Cursor: c.Query("cursor"),
		Limit: pageLimit(c, 50),
	}
	// Pasted ids carry spaces and newlines; none of these fields can.
	for _, p := range []*string{&q.RequestID, &q.RID, &q.Tenant, &q.Node, &q.Status, &q.Cursor} {
		*p = strings.TrimSpace(*p)
	}
	for _, v := range []string{q.RequestID, q.RID, q.Tenant, q.Node, q.Status, q.Cursor} {
		if !validUTF8Param(v) {
			return q, invalid("a search field is not valid UTF-8 or is too long")
		}
	}
	if _, ok := searchSorts[q.Sort]; !ok {
		return q, invalid("sort must be ts_desc, ts_asc, prompt_desc or prompt_asc")
	}
	switch q.Status {
	case "", "2xx", "3xx", "4xx", "5xx", "error":
	default:
		if n, err := strconv.Atoi(q.Status); err != nil || n < 100 || n > 599 {
			return q, invalid("status must be a code (100-599), 2xx, 3xx, 4xx, 5xx or error")
		}
	}
	var err error
	if v := strings.TrimSpace(c.Query("bootstrap_room")); v != "" {
		if q.Room, err = strconv.ParseUint(v, 10, 64); err != nil {
			return q, invalid("bootstrap_room must be an unsigned integer")
		}
	}
	for _, f := range []struct {
		key string
		dst *uint64
	}{{"min_prompt", &q.MinPrompt}, {"max_prompt", &q.MaxPrompt}} {
		if v := c.Query(f.key); v != "" {
			if *f.dst, err = strconv.ParseUint(v, 10, 64); err != nil {
				return q, invalid(f.key + " must be an unsigned integer")
			}
		}
	}
	if q.From, err = parseTime(c.Query("from")); err != nil {
		return q, err
	}
	if q.To, err = parseTime(c.Query("to")); err != nil {
		return q, err
	}
	return q, nil
}

func searchParams(q SearchQuery) map[string]any {
	return map[string]any{"request_id": q.RequestID, "rid": q.RID, "bootstrap_room": q.Room, "tenant": q.Tenant,
		"node": q.Node, "from": q.From, "to": q.To, "status": q.Status, "min_prompt": q.MinPrompt,
		"max_prompt": q.MaxPrompt, "sort": q.Sort, "cursor": q.Cursor, "limit": q.Limit}
}

// searchView is the search page: the form, one page of rows, the total.
type searchView struct {
	SearchPage
	Searched bool      `json:"-"`
	Links    pageLinks `json:"-"`
	CaseID   string    `json:"case_id,omitempty"`
	// Tenant and Affected are set on a case's tenant view.
	Tenant   string        `json:"tenant,omitempty"`
	Affected []AffectedRow `json:"affected,omitempty"`
	// AffectedRequests lists the tenant's affected requests first, received
	// before exposed, each with its side, tier and the other side.
	AffectedRequests []affectedRequest `json:"affected_requests,omitempty"`
}

// affectedRequest is one request an affected row names.
type affectedRequest struct {
	RequestID    string      `json:"request_id"`
	Role         domain.Role `json:"affected_role"`
	Tier         domain.Tier `json:"tier,omitempty"`
	Counterparts []string    `json:"counterparts,omitempty"`
}

// maxAffectedRequests bounds the list at the top of a tenant view.
const maxAffectedRequests = 1000

func (s *server) search(c *gin.Context) {
	q, err := parseSearch(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	searched := len(c.Request.URL.RawQuery) > 0
	view := searchView{SearchPage: SearchPage{Query: q}, Searched: searched}
	if searched || isAPI(c) {
		page, err := s.searches.SearchRequests(c.Request.Context(), q)
		if err != nil {
			s.fail(c, err)
			return
		}
		if !s.audit(c, principal(c), "search", searchParams(q), int64(page.Total), http.StatusOK) {
			return
		}
		view.SearchPage = page
		view.Links = pager(c, "/search", page.Next)
	}
	s.respond(c, "search", "Search requests", view)
}
