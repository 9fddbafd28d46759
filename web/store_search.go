package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// RequestRow is one client response from gateway_responses.
type RequestRow struct {
	TS               time.Time `ch:"ts" json:"ts"`
	TSNS             uint64    `ch:"ts_ns" json:"ts_ns,string"`
	RequestID        string    `ch:"request_id" json:"request_id"`
	Tenant           string    `ch:"tenant" json:"tenant"`
	Model            string    `ch:"model" json:"model"`
	Status           uint16    `ch:"status" json:"status"`
	PromptTokens     uint64    `ch:"prompt_tokens" json:"prompt_tokens"`
	CompletionTokens uint64    `ch:"completion_tokens" json:"completion_tokens"`
	CachedTokens     uint64    `ch:"cached_tokens" json:"cached_tokens"`
	TTFTMS           float64   `ch:"ttft_ms" json:"ttft_ms"`
	DurationMS       float64   `ch:"duration_ms" json:"duration_ms"`
	PrefillEndpoint  string    `ch:"prefill_endpoint" json:"prefill_endpoint"`
	DecodeEndpoint   string    `ch:"decode_endpoint" json:"decode_endpoint"`
	Room             uint64    `ch:"bootstrap_room" json:"bootstrap_room,string"`
	PrefillRID       string    `ch:"prefill_rid" json:"prefill_rid"`
	DecodeRID        string    `ch:"decode_rid" json:"decode_rid"`
	Gateway          string    `ch:"gateway" json:"gateway"`
	LineID           uint64    `ch:"line_id" json:"line_id,string"`
	// Affected marks, on a case's tenant view, a request the case's
	// reconstruction names.
	Affected bool `json:"affected,omitempty"`
}

const requestCols = `ts, ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens, cached_tokens,
 ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, gateway, line_id`

// SearchQuery is the request search form. Zero values mean "any".
type SearchQuery struct {
	RequestID string    `json:"request_id,omitempty"`
	RID       string    `json:"rid,omitempty"`
	Room      uint64    `json:"bootstrap_room,omitempty,string"`
	Tenant    string    `json:"tenant,omitempty"`
	Node      string    `json:"node,omitempty"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Status    string    `json:"status,omitempty"`
	MinPrompt uint64    `json:"min_prompt,omitempty"`
	MaxPrompt uint64    `json:"max_prompt,omitempty"`
	Sort      string    `json:"sort"`
	Limit     int       `json:"limit"`
	Cursor    string    `json:"cursor,omitempty"`
	// tenants are the stored tenant names Tenant matches (resolved by
	// SearchRequests: case-insensitive, "acme*" for a prefix).
	tenants []string
}

// tenantPrefix reports a prefix search ("acme*") and its prefix.
func tenantPrefix(t string) (string, bool) {
	if p, ok := strings.CutSuffix(t, "*"); ok {
		return p, true
	}
	return t, false
}

// resolveTenants turns the tenant field into the stored names it matches,
// so the filter stays "tenant IN (...)" on the table's first key column.
func (s chStore) resolveTenants(ctx context.Context, t string) ([]string, error) {
	p, prefix := tenantPrefix(t)
	if !prefix {
		// The usual case, spelled as stored: one key read.
		var n uint64
		if err := s.c.QueryRow(ctx, "SELECT count() FROM (SELECT 1 FROM gateway_responses WHERE tenant = ? LIMIT 1)", p).Scan(&n); err != nil {
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
	if err := s.c.Select(ctx, &rows, "SELECT DISTINCT tenant FROM gateway_responses WHERE "+cond+" LIMIT 1000", p); err != nil {
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
var searchSorts = map[string]struct {
	col  string // primary sort column, "" for time only
	desc bool
}{
	"ts_desc":     {"", true},
	"ts_asc":      {"", false},
	"prompt_desc": {"prompt_tokens", true},
	"prompt_asc":  {"prompt_tokens", false},
}

// searchCursor is the last row of a page: the keyset to continue after.
type searchCursor struct {
	P uint64 `json:"p,omitempty"`
	T uint64 `json:"t"`
	I string `json:"i"`
}

func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 1024 || json.Unmarshal(b, v) != nil {
		return invalid("bad cursor")
	}
	return nil
}

// SearchPage is one page of results and the honest total of all matches.
type SearchPage struct {
	Query SearchQuery  `json:"query"`
	Rows  []RequestRow `json:"rows"`
	Total uint64       `json:"total"`
	Next  string       `json:"next,omitempty"`
}

// searchWhere builds the filter; every value is a bound parameter.
func searchWhere(q SearchQuery) (string, []any) {
	w := []string{"1"}
	var args []any
	add := func(cond string, a ...any) { w = append(w, cond); args = append(args, a...) }
	if q.Tenant != "" {
		if len(q.tenants) == 0 {
			add("0")
		} else {
			a := make([]any, len(q.tenants))
			for i, t := range q.tenants {
				a[i] = t
			}
			add("tenant IN ("+placeholders(len(a))+")", a...)
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
		add("ts >= ?", utc(q.From))
	}
	if !q.To.IsZero() {
		add("ts <= ?", utc(q.To))
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
			sub, sa = sub+" AND ts >= ?", append(sa, utc(q.From).Add(-time.Hour))
		}
		if !q.To.IsZero() {
			sub, sa = sub+" AND ts <= ?", append(sa, utc(q.To).Add(time.Hour))
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
func (s chStore) SearchRequests(ctx context.Context, q SearchQuery) (SearchPage, error) {
	page := SearchPage{Query: q}
	if q.Tenant != "" {
		var err error
		if q.tenants, err = s.resolveTenants(ctx, q.Tenant); err != nil {
			return page, err
		}
	}
	sort := searchSorts[q.Sort]
	where, args := searchWhere(q)
	if err := s.c.QueryRow(ctx, "SELECT count() FROM gateway_responses FINAL WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("count requests: %w", err)
	}
	op, dir := ">", "ASC"
	if sort.desc {
		op, dir = "<", "DESC"
	}
	if q.Cursor != "" {
		var cur searchCursor
		if err := decodeCursor(q.Cursor, &cur); err != nil {
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
	sql := "SELECT " + requestCols + " FROM gateway_responses FINAL WHERE " + where + " ORDER BY " + order + " LIMIT ?"
	args = append(args, q.Limit+1)
	if err := s.c.Select(ctx, &page.Rows, sql, args...); err != nil {
		return page, fmt.Errorf("search requests: %w", err)
	}
	if len(page.Rows) > q.Limit {
		page.Rows = page.Rows[:q.Limit]
		last := page.Rows[len(page.Rows)-1]
		cur := searchCursor{T: last.TSNS, I: last.RequestID}
		if sort.col == "prompt_tokens" {
			cur.P = last.PromptTokens
		}
		page.Next = encodeCursor(cur)
	}
	return page, nil
}
