package chstore

import (
	"context"
	"fmt"
)

// The statements of `kvtrail bench push` and `kvtrail bench ui`
// (internal/bench): what they count, sample and use as a baseline.

// BenchPushCounts are the distinct raw lines stored for nodes whose name
// starts with nodePrefix, and the lines ingest_sources counts for them.
func (s *Store) BenchPushCounts(ctx context.Context, nodePrefix string) (stored, counted uint64, err error) {
	like := benchLikePrefix(nodePrefix)
	if err := s.QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT line_id FROM raw_lines WHERE node LIKE ?)", like).Scan(&stored); err != nil {
		return 0, 0, fmt.Errorf("count stored lines: %w", err)
	}
	q := "SELECT sum(l) FROM (SELECT argMax(lines, version) AS l FROM ingest_sources WHERE node LIKE ? GROUP BY source_id)"
	if err := s.QueryRow(ctx, q, like).Scan(&counted); err != nil {
		return 0, 0, fmt.Errorf("count ingest_sources lines: %w", err)
	}
	return stored, counted, nil
}

// benchLikePrefix is a LIKE pattern matching what starts with p.
func benchLikePrefix(p string) string {
	r := []rune{}
	for _, c := range p {
		if c == '%' || c == '_' || c == '\\' {
			r = append(r, '\\')
		}
		r = append(r, c)
	}
	return string(r) + "%"
}

// BenchUICounts are how many gateway responses and raw lines are stored.
func (s *Store) BenchUICounts(ctx context.Context) (requests, lines uint64, err error) {
	if err := s.QueryRow(ctx, "SELECT count() FROM gateway_responses").Scan(&requests); err != nil {
		return 0, 0, fmt.Errorf("count requests: %w", err)
	}
	if err := s.QueryRow(ctx, "SELECT count() FROM raw_lines").Scan(&lines); err != nil {
		return 0, 0, fmt.Errorf("count lines: %w", err)
	}
	return requests, lines, nil
}

// BenchRequest is a sampled gateway request.
type BenchRequest struct {
	ID, Tenant string
}

// BenchSampleRequests returns up to n gateway requests with an id, in a
// fixed pseudo-random order (by the id's hash).
func (s *Store) BenchSampleRequests(ctx context.Context, n int) ([]BenchRequest, error) {
	rows, err := s.Query(ctx, `SELECT request_id, tenant FROM gateway_responses WHERE request_id != ''
ORDER BY cityHash64(request_id) LIMIT ?`, max(n, 0))
	if err != nil {
		return nil, fmt.Errorf("sample requests: %w", err)
	}
	defer rows.Close()
	var out []BenchRequest
	for rows.Next() {
		var r BenchRequest
		if err := rows.Scan(&r.ID, &r.Tenant); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// BenchAnyTenant is one tenant of the gateway responses, the same on every
// call ("" when there is none).
func (s *Store) BenchAnyTenant(ctx context.Context) string {
	var tenant string
	_ = s.QueryRow(ctx, "SELECT tenant FROM gateway_responses ORDER BY cityHash64(request_id) LIMIT 1").Scan(&tenant)
	return tenant
}

// DropQueryCaches drops the server's mark and uncompressed caches, so the
// next read of a part reads its index marks again (a cold visit).
func (s *Store) DropQueryCaches(ctx context.Context) error {
	for _, c := range []string{"SYSTEM DROP MARK CACHE", "SYSTEM DROP UNCOMPRESSED CACHE"} {
		if err := s.Exec(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	return nil
}

// BenchKeyRead is one id_index primary-key read of a request id: the
// floor of a keyed page.
func (s *Store) BenchKeyRead(ctx context.Context, requestID string) error {
	var n uint64
	return s.QueryRow(ctx, "SELECT count() FROM id_index WHERE id = ? AND id_kind = 'request_id'", requestID).Scan(&n)
}

// BenchLineScan is a scan of raw_lines for one line id: what a page cost
// before it was keyed.
func (s *Store) BenchLineScan(ctx context.Context, lineID uint64) error {
	var n uint64
	return s.QueryRow(ctx, "SELECT count() FROM raw_lines WHERE line_id = ?", lineID).Scan(&n)
}
