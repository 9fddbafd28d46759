package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// auditStore is what the audit log needs.
type auditStore interface {
	WriteAudit(ctx context.Context, e AuditEntry) error
	ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error)
}

// auditClock hands out strictly increasing nanosecond timestamps, so the
// audit page's keyset cursor (ts_ns) never skips or repeats a row written
// by this process.
type auditClock struct {
	mu   sync.Mutex
	last int64
	now  func() time.Time
}

func (a *auditClock) next() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.now().UnixNano()
	if n <= a.last {
		n = a.last + 1
	}
	a.last = n
	return time.Unix(0, n).UTC()
}

// audit records an action. It returns false (and has answered 500) when the
// row could not be written: an action that cannot be audited is not shown.
func (s *server) audit(c *gin.Context, p *Principal, action string, params map[string]any, count int64, status int) bool {
	if p == nil {
		p = &Principal{}
	}
	b, _ := json.Marshal(params)
	if params == nil {
		b = []byte("{}")
	}
	ts := s.clock.next()
	e := AuditEntry{TS: ts, TSNS: uint64(ts.UnixNano()), User: p.Name, Role: p.Role, Action: action,
		Params: string(b), ResultCount: count, Status: uint16(status), RemoteAddr: clientAddr(c)}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 10*time.Second)
	defer cancel()
	if err := s.audits.WriteAudit(ctx, e); err != nil {
		s.log.Error("audit write failed", slog.String("action", action), slog.Any("err", err))
		s.fail(c, err)
		return false
	}
	return true
}

// auditView is one page of the audit log with its page links (the JSON is
// the AuditPage's).
type auditView struct {
	AuditPage
	Links pageLinks `json:"-"`
}

func (s *server) auditList(c *gin.Context) {
	q := AuditQuery{User: strings.TrimSpace(c.Query("user")), Action: strings.TrimSpace(c.Query("action")),
		Tenant: strings.TrimSpace(c.Query("tenant")), Limit: pageLimit(c, 100)}
	var err error
	if q.From, err = parseTime(c.Query("from")); err != nil {
		s.fail(c, err)
		return
	}
	if q.To, err = parseTime(c.Query("to")); err != nil {
		s.fail(c, err)
		return
	}
	if cur := c.Query("cursor"); cur != "" {
		if q.Before, err = strconv.ParseUint(cur, 10, 64); err != nil {
			s.fail(c, invalid("bad cursor"))
			return
		}
	}
	page, err := s.audits.ListAudit(c.Request.Context(), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "audit_view", map[string]any{"user": q.User, "action": q.Action, "tenant_filter": q.Tenant, "cursor": c.Query("cursor")}, int64(len(page.Entries)), http.StatusOK) {
		return
	}
	s.respond(c, "audit", "Audit log", auditView{AuditPage: page, Links: pager(c, "/admin/audit", page.Next)})
}
