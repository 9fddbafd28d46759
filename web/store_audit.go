package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// AuditEntry is one row of the append-only audit_log.
type AuditEntry struct {
	TS          time.Time `ch:"ts" json:"ts"`
	TSNS        uint64    `ch:"ts_ns" json:"ts_ns,string"`
	User        string    `ch:"user" json:"user"`
	Role        string    `ch:"role" json:"role"`
	Action      string    `ch:"action" json:"action"`
	Params      string    `ch:"params" json:"params"`
	ResultCount int64     `ch:"result_count" json:"result_count"`
	Status      uint16    `ch:"status" json:"status"`
	RemoteAddr  string    `ch:"remote_addr" json:"remote_addr"`
}

// AuditQuery filters the audit log; Before is the keyset cursor (ts_ns).
type AuditQuery struct {
	User   string `json:"user,omitempty"`
	Action string `json:"action,omitempty"`
	// Tenant: entries whose parameters name this tenant (a request,
	// search, finding or tenant view of it).
	Tenant string `json:"tenant,omitempty"`
	From   time.Time
	To     time.Time
	Before uint64 `json:"-"`
	Limit  int    `json:"limit"`
}

// AuditPage is one page of the audit log, newest first.
type AuditPage struct {
	Query   AuditQuery   `json:"query"`
	Entries []AuditEntry `json:"entries"`
	Total   uint64       `json:"total"`
	Next    string       `json:"next,omitempty"`
}

// Audit rows are only ever inserted: kvtrail has no UPDATE or DELETE on
// audit_log anywhere, and a single row goes in with INSERT ... SELECT.
const insertAudit = `INSERT INTO audit_log (ts, ts_ns, user, role, action, params, result_count, status, remote_addr)
SELECT ?, ?, ?, ?, ?, ?, toInt64(?), toUInt16(?), ?`

func (s chStore) WriteAudit(ctx context.Context, e AuditEntry) error {
	if err := s.c.Exec(ctx, insertAudit, utc(e.TS), e.TSNS, e.User, e.Role, e.Action, e.Params, e.ResultCount, e.Status, e.RemoteAddr); err != nil {
		return fmt.Errorf("write audit: %w", err)
	}
	return nil
}

func auditWhere(q AuditQuery) (string, []any) {
	var w []string
	var args []any
	if q.User != "" {
		w, args = append(w, "user = ?"), append(args, q.User)
	}
	if q.Action != "" {
		w, args = append(w, "action = ?"), append(args, q.Action)
	}
	if q.Tenant != "" {
		// params is the JSON of a map, so the tenant appears exactly as
		// "tenant":<its JSON string>.
		enc, _ := json.Marshal(q.Tenant)
		w, args = append(w, "position(params, ?) > 0"), append(args, `"tenant":`+string(enc))
	}
	if !q.From.IsZero() {
		w, args = append(w, "ts >= ?"), append(args, utc(q.From))
	}
	if !q.To.IsZero() {
		w, args = append(w, "ts <= ?"), append(args, utc(q.To))
	}
	if len(w) == 0 {
		return "1", nil
	}
	return strings.Join(w, " AND "), args
}

func (s chStore) ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	where, args := auditWhere(q)
	page := AuditPage{Query: q}
	if err := s.c.QueryRow(ctx, "SELECT count() FROM audit_log WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("count audit: %w", err)
	}
	if q.Before > 0 {
		where += " AND ts_ns < ? AND ts <= ?"
		args = append(args, q.Before, time.Unix(0, int64(q.Before)).UTC().Truncate(time.Second).Add(time.Second))
	}
	sql := `SELECT ts, ts_ns, user, role, action, params, result_count, status, remote_addr
FROM audit_log WHERE ` + where + ` ORDER BY ts_ns DESC LIMIT ?`
	args = append(args, q.Limit+1)
	if err := s.c.Select(ctx, &page.Entries, sql, args...); err != nil {
		return page, fmt.Errorf("list audit: %w", err)
	}
	if len(page.Entries) > q.Limit {
		page.Entries = page.Entries[:q.Limit]
		page.Next = fmt.Sprint(page.Entries[len(page.Entries)-1].TSNS)
	}
	return page, nil
}
