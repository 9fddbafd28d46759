package chstore

import (
	"github.com/kvtrail/kvtrail/domain"

	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Audit rows are only ever inserted: kvtrail has no UPDATE or DELETE on
// audit_log anywhere, and a single row goes in with INSERT ... SELECT.
const uiInsertAudit = `INSERT INTO audit_log (ts, ts_ns, user, role, action, params, result_count, status, remote_addr)
SELECT ?, ?, ?, ?, ?, ?, toInt64(?), toUInt16(?), ?`

func (s UIStore) WriteAudit(ctx context.Context, e domain.AuditEntry) error {
	if err := s.Store.Exec(ctx, uiInsertAudit, uiUTC(e.TS), e.TSNS, e.User, e.Role, e.Action, e.Params, e.ResultCount, e.Status, e.RemoteAddr); err != nil {
		return fmt.Errorf("write audit: %w", err)
	}
	return nil
}

func uiAuditWhere(q domain.AuditQuery) (string, []any) {
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
		w, args = append(w, "ts >= ?"), append(args, uiUTC(q.From))
	}
	if !q.To.IsZero() {
		w, args = append(w, "ts <= ?"), append(args, uiUTC(q.To))
	}
	if len(w) == 0 {
		return "1", nil
	}
	return strings.Join(w, " AND "), args
}

func (s UIStore) ListAudit(ctx context.Context, q domain.AuditQuery) (domain.AuditPage, error) {
	where, args := uiAuditWhere(q)
	page := domain.AuditPage{Query: q}
	if err := s.Store.QueryRow(ctx, "SELECT count() FROM audit_log WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("count audit: %w", err)
	}
	if q.Before > 0 {
		where += " AND ts_ns < ? AND ts <= ?"
		args = append(args, q.Before, time.Unix(0, int64(q.Before)).UTC().Truncate(time.Second).Add(time.Second))
	}
	sql := `SELECT ts, ts_ns, user, role, action, params, result_count, status, remote_addr
FROM audit_log WHERE ` + where + ` ORDER BY ts_ns DESC LIMIT ?`
	args = append(args, q.Limit+1)
	if err := s.Store.Select(ctx, &page.Entries, sql, args...); err != nil {
		return page, fmt.Errorf("list audit: %w", err)
	}
	if len(page.Entries) > q.Limit {
		page.Entries = page.Entries[:q.Limit]
		page.Next = fmt.Sprint(page.Entries[len(page.Entries)-1].TSNS)
	}
	return page, nil
}
