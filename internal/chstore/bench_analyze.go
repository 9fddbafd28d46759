package chstore

import (
	"context"
	"fmt"
	"time"
)

// BenchScan is one timed baseline read of `kvtrail bench analyze`.
type BenchScan struct {
	Name     string
	Duration time.Duration
	Rows     uint64
}

// benchAnalysisScans read every column the analysis reads, with the same
// filters, streamed to the client and discarded (what `SELECT ... FORMAT
// Null` costs plus the transfer): the floor any analysis of this data
// pays. The decode replay reads its columns of engine_events again, so the
// baseline reads them once, like the analysis's own load does.
var benchAnalysisScans = []struct{ name, sql string }{
	{"gateway_responses", `SELECT ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens, cached_tokens,
 ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, line_id
FROM gateway_responses WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)`},
	{"engine_events", `SELECT ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, cached_tokens, finish_type, finish_message, status_code, line_id, msg_index
FROM engine_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND event != 'http_access'`},
	{"transfer_events", `SELECT ts_ns, node, role, dp_rank, source, event, rid, bootstrap_room, other_room, metadata_index,
 reason, peer, nic, line_id, msg_index
FROM transfer_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)`},
	{"page_events", `SELECT node, dp_rank, ts_ns, event, rid, bootstrap_room, pages, line_id, msg_index
FROM page_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)`},
	{"raw_lines (per-minute completeness)", `SELECT node, ts, line_id FROM raw_lines WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)`},
	{"node_boots", `SELECT node, role, boot_ts, boot_ts_ns, boot_id, sglang_version, disaggregation_mode, page_size,
 context_len, max_total_num_tokens, max_req_input_len, kv_pool_tokens, dp_size, allow_auto_truncate,
 arg_keys, arg_values, line_ids
FROM node_boots WHERE boot_ts <= toDateTime(?) OR boot_ts >= toDateTime(?)`},
}

// BenchAnalysisScans times one streamed read of every column the analysis
// of [from, to] reads, table by table.
func (s *Store) BenchAnalysisScans(ctx context.Context, from, to time.Time) ([]BenchScan, error) {
	f, t := uint32(from.Unix()), uint32(to.Unix())
	var out []BenchScan
	for _, sc := range benchAnalysisScans {
		t0 := time.Now()
		rows, err := s.Query(ctx, sc.sql, f, t)
		if err != nil {
			return out, fmt.Errorf("scan %s: %w", sc.name, err)
		}
		var count uint64
		for rows.Next() {
			count++ // each block is decoded by the driver; the rows are discarded
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return out, fmt.Errorf("scan %s: %w", sc.name, err)
		}
		out = append(out, BenchScan{Name: sc.name, Duration: time.Since(t0), Rows: count})
	}
	return out, nil
}

// CountRequestFacts is how many rows request_facts holds.
func (s *Store) CountRequestFacts(ctx context.Context) (uint64, error) {
	var n uint64
	err := s.QueryRow(ctx, "SELECT count() FROM request_facts").Scan(&n)
	return n, err
}

// HighFindingsSince counts the HIGH findings per analyzer dated at or
// after since (`kvtrail bench detect`).
func (s *Store) HighFindingsSince(ctx context.Context, since time.Time) (map[string]int, error) {
	rows, err := s.Query(ctx, "SELECT analyzer, count() AS n FROM findings WHERE severity = 'HIGH' AND ts >= toDateTime(?) GROUP BY analyzer",
		uint32(since.Unix()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var a string
		var n uint64
		if err := rows.Scan(&a, &n); err != nil {
			return nil, err
		}
		out[a] = int(n)
	}
	return out, rows.Err()
}

// DropDatabase drops another database of the server (a benchmark run's).
func (s *Store) DropDatabase(ctx context.Context, db string) error {
	if !identRE.MatchString(db) {
		return fmt.Errorf("chstore: drop database %q: not a database name", db)
	}
	return s.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
}
