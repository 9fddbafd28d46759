package chstore

import (
	"github.com/kvtrail/kvtrail/domain"

	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

const uiRequestCols = `ts, ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens, cached_tokens,
 ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, gateway, line_id`

// uiTenantPrefix reports a prefix search ("acme*") and its prefix.
func uiTenantPrefix(t string) (string, bool) {
	if p, ok := strings.CutSuffix(t, "*"); ok {
		return p, true
	}
	return t, false
}

// resolveTenants turns the tenant field into the stored names it matches,
// so the filter stays "tenant IN (...)" on the table's first key column.
func (s UIStore) resolveTenants(ctx context.Context, t string) ([]string, error) {
	p, prefix := uiTenantPrefix(t)
	if !prefix {
		// The usual case, spelled as stored: one key read.
		var n uint64
		if err := s.Store.QueryRow(ctx, "SELECT count() FROM (SELECT 1 FROM gateway_responses WHERE tenant = ? LIMIT 1)", p).Scan(&n); err != nil {
			return nil, fmt.Errorf("tenants: %w", err)
		}
		if n > 0 {
			return []string{p}, nil
		}
	}
	cond := "lower(tenant) = lower(?)"
	if prefix {
		cond = "startsWith(lower(tenant), lower(?))"
	}
	var rows []struct {
		T string `ch:"tenant"`
	}
	if err := s.Store.Select(ctx, &rows, "SELECT DISTINCT tenant FROM gateway_responses WHERE "+cond+" LIMIT 1000", p); err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.T
	}
	return out, nil
}

// Sorts the search offers. Each ends in (ts_ns, request_id), so the keyset
// cursor is unique even when prompt lengths or times repeat.
var uiSearchSorts = map[string]struct {
	col  string // primary sort column, "" for time only
	desc bool
}{
	"ts_desc":     {"", true},
	"ts_asc":      {"", false},
	"prompt_desc": {"prompt_tokens", true},
	"prompt_asc":  {"prompt_tokens", false},
}

// uiSearchCursor is the last row of a page: the keyset to continue after.
type uiSearchCursor struct {
	P uint64 `json:"p,omitempty"`
	T uint64 `json:"t"`
	I string `json:"i"`
}

func uiEncodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func uiDecodeCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 1024 || json.Unmarshal(b, v) != nil {
		return uiInvalid("bad cursor")
	}
	return nil
}

// uiSearchWhere builds the filter; every value is a bound parameter.
func uiSearchWhere(q domain.SearchQuery, tenants []string) (string, []any) {
	w := []string{"1"}
	var args []any
	add := func(cond string, a ...any) { w = append(w, cond); args = append(args, a...) }
	if q.Tenant != "" {
		if len(tenants) == 0 {
			add("0")
		} else {
			a := make([]any, len(tenants))
			for i, t := range tenants {
				a[i] = t
			}
			add("tenant IN ("+uiPlaceholders(len(a))+")", a...)
		}
	}
	if q.RequestID != "" {
		if p, ok := strings.CutSuffix(q.RequestID, "*"); ok {
			add("startsWith(request_id, ?)", p)
		} else {
			add("request_id = ?", q.RequestID)
		}
	}
	if q.Room != 0 {
		add("bootstrap_room = ?", q.Room)
	}
	if !q.From.IsZero() {
		add("ts >= ?", uiUTC(q.From))
	}
	if !q.To.IsZero() {
		add("ts <= ?", uiUTC(q.To))
	}
	if q.RID != "" {
		// GLOBAL IN: on a cluster both tables are Distributed, and a plain
		// IN over them is refused ("double-distributed"); on one server
		// GLOBAL IN means the same as IN.
		add("(prefill_rid = ? OR decode_rid = ? OR bootstrap_room GLOBAL IN (SELECT bootstrap_room FROM engine_events WHERE rid = ? AND bootstrap_room != 0))",
			q.RID, q.RID, q.RID)
	}
	if q.Node != "" {
		sub := "SELECT bootstrap_room FROM engine_events WHERE node = ? AND bootstrap_room != 0"
		sa := []any{q.Node}
		if !q.From.IsZero() {
			sub, sa = sub+" AND ts >= ?", append(sa, uiUTC(q.From).Add(-time.Hour))
		}
		if !q.To.IsZero() {
			sub, sa = sub+" AND ts <= ?", append(sa, uiUTC(q.To).Add(time.Hour))
		}
		add("bootstrap_room GLOBAL IN ("+sub+")", sa...)
	}
	switch q.Status {
	case "":
	case "2xx", "3xx", "4xx", "5xx":
		lo := uint16(q.Status[0]-'0') * 100
		add("status >= ? AND status < ?", lo, lo+100)
	case "error":
		add("(status < 200 OR status >= 300)")
	default:
		var n uint16
		fmt.Sscan(q.Status, &n)
		add("status = ?", n)
	}
	if q.MinPrompt > 0 {
		add("prompt_tokens >= ?", q.MinPrompt)
	}
	if q.MaxPrompt > 0 {
		add("prompt_tokens <= ?", q.MaxPrompt)
	}
	return strings.Join(w, " AND "), args
}

// SearchRequests pages through gateway_responses with a keyset on
// (primary sort column, ts_ns, request_id) — never OFFSET — and counts every
// match with the same filter, so "N results" is the real number.
func (s UIStore) SearchRequests(ctx context.Context, q domain.SearchQuery) (domain.SearchPage, error) {
	page := domain.SearchPage{Query: q}
	// The stored tenant names the tenant field matches (case-insensitive,
	// "acme*" for a prefix), so the filter stays on the key's first column.
	var tenants []string
	if q.Tenant != "" {
		var err error
		if tenants, err = s.resolveTenants(ctx, q.Tenant); err != nil {
			return page, err
		}
	}
	sort := uiSearchSorts[q.Sort]
	where, args := uiSearchWhere(q, tenants)
	if err := s.Store.QueryRow(ctx, "SELECT count() FROM gateway_responses FINAL WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("count requests: %w", err)
	}
	op, dir := ">", "ASC"
	if sort.desc {
		op, dir = "<", "DESC"
	}
	if q.Cursor != "" {
		var cur uiSearchCursor
		if err := uiDecodeCursor(q.Cursor, &cur); err != nil {
			return page, err
		}
		tieBreak := "(ts_ns " + op + " ? OR (ts_ns = ? AND request_id " + op + " ?))"
		if sort.col == "" {
			where += " AND " + tieBreak
			args = append(args, cur.T, cur.T, cur.I)
			// A bound on ts as well lets ClickHouse skip whole partitions.
			bound := time.Unix(0, int64(cur.T)).UTC().Truncate(time.Second)
			if sort.desc {
				where, args = where+" AND ts <= ?", append(args, bound)
			} else {
				where, args = where+" AND ts >= ?", append(args, bound)
			}
		} else {
			where += " AND (" + sort.col + " " + op + " ? OR (" + sort.col + " = ? AND " + tieBreak + "))"
			args = append(args, cur.P, cur.P, cur.T, cur.T, cur.I)
		}
	}
	order := "ts_ns " + dir + ", request_id " + dir
	if sort.col != "" {
		order = sort.col + " " + dir + ", " + order
	}
	sql := "SELECT " + uiRequestCols + " FROM gateway_responses FINAL WHERE " + where + " ORDER BY " + order + " LIMIT ?"
	args = append(args, q.Limit+1)
	if err := s.Store.Select(ctx, &page.Rows, sql, args...); err != nil {
		return page, fmt.Errorf("search requests: %w", err)
	}
	if len(page.Rows) > q.Limit {
		page.Rows = page.Rows[:q.Limit]
		last := page.Rows[len(page.Rows)-1]
		cur := uiSearchCursor{T: last.TSNS, I: last.RequestID}
		if sort.col == "prompt_tokens" {
			cur.P = last.PromptTokens
		}
		page.Next = uiEncodeCursor(cur)
	}
	return page, nil
}
