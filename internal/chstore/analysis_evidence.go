package chstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chblock"
)

// The analysis' reads of the evidence: node boots, the request-level
// lines of a time range (gateway responses, engine and transfer events),
// the decode lines and page events the allocator and page replays walk,
// canary probe verdicts, and the few lookups around them. Reads of many
// rows stream them to a callback in the order the query gives, so a
// caller can work lane by lane without holding the whole range; a
// callback's error stops the read and is returned as is.

const anDataSpanSQL = `SELECT min(ts_ns), max(ts_ns), max(ingested_at) FROM gateway_responses`
const anEngineSpanSQL = `SELECT min(ts_ns), max(ts_ns), max(ingested_at) FROM engine_events`

// AnalysisDataSpan is the span of the request-level tables (gateway
// responses and engine lines): From the earliest line's second, To one
// second after the latest, and the ingest watermark (latest ingested_at).
// All zero when nothing is stored.
func (s *Store) AnalysisDataSpan(ctx context.Context) (domain.DataSpan, error) {
	var sp domain.DataSpan
	var lo, hi uint64
	for _, q := range []string{anDataSpanSQL, anEngineSpanSQL} {
		rows, err := s.Query(ctx, q)
		if err != nil {
			return sp, fmt.Errorf("data span: %w", err)
		}
		for rows.Next() {
			var a, b uint64
			var wm time.Time
			if err := rows.Scan(&a, &b, &wm); err != nil {
				rows.Close()
				return sp, fmt.Errorf("scan data span: %w", err)
			}
			if a > 0 && (lo == 0 || a < lo) {
				lo = a
			}
			if b > hi {
				hi = b
			}
			if wm.After(sp.Watermark) {
				sp.Watermark = wm.UTC()
			}
		}
		rows.Close()
	}
	if lo == 0 {
		return sp, nil
	}
	sp.From = time.Unix(0, int64(lo)).UTC().Truncate(time.Second)
	sp.To = time.Unix(0, int64(hi)).UTC().Truncate(time.Second).Add(time.Second)
	return sp, nil
}

const anBootsSQL = `SELECT node, role, boot_ts, boot_ts_ns, boot_id, sglang_version, disaggregation_mode, page_size,
 context_len, max_total_num_tokens, max_req_input_len, kv_pool_tokens, dp_size, allow_auto_truncate,
 arg_keys, arg_values, line_ids
FROM node_boots FINAL
ORDER BY node, boot_ts_ns`

// NodeBoots reads every node boot (latest version of each row), indexed by
// node in time order.
func (s *Store) NodeBoots(ctx context.Context) (*domain.Boots, error) {
	rows, err := s.Query(ctx, anBootsSQL)
	if err != nil {
		return nil, fmt.Errorf("load node boots: %w", err)
	}
	defer rows.Close()
	var list []*domain.Boot
	for rows.Next() {
		var (
			b          domain.Boot
			ps         uint32
			dp         uint16
			at         uint8
			keys, vals []string
		)
		if err := rows.Scan(&b.Node, &b.Role, &b.At, &b.AtNs, &b.ID, &b.Version, &b.Mode, &ps, &b.ContextLen,
			&b.MaxTotalTokens, &b.MaxReqInputLen, &b.KVPool, &dp, &at, &keys, &vals, &b.Lines); err != nil {
			return nil, fmt.Errorf("scan node boot: %w", err)
		}
		b.PageSize, b.DPSize, b.AutoTruncate = uint64(ps), uint64(dp), at == 1
		if b.AtNs > 0 {
			b.At = time.Unix(0, int64(b.AtNs)).UTC()
		}
		b.Args = make(map[string]string, len(keys))
		for i, k := range keys {
			if i < len(vals) {
				b.Args[k] = vals[i]
			}
		}
		b.HasLimits = b.MaxReqInputLen > 0 && b.ContextLen > 0
		b.HasPage = b.PageSize > 0
		if b.DPSize == 0 {
			b.DPSize = 1
		}
		list = append(list, &b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read node boots: %w", err)
	}
	return domain.NewBoots(list), nil
}

// anEngineEventsSQL: every per-request line in the time range. http_access
// lines carry no request id and are not needed. Unordered: scanEngine
// sorts (sorted_rows.go).
const anEngineEventsSQL = `SELECT ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, cached_tokens, finish_type, finish_message, status_code, line_id, msg_index
FROM engine_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND event != 'http_access'`

// ScanEngineEvents streams the per-request engine lines of [from, to]
// (whole seconds, both ends included) in time order, each line once.
func (s *Store) ScanEngineEvents(ctx context.Context, from, to time.Time, fn func(*domain.EngineEvent) error) error {
	return s.scanEngine(ctx, anEngineEventsSQL, []any{uint32(from.Unix()), uint32(to.Unix())}, fn)
}

// lineAt is the last row a scan ordered by ts_ns, line_id, msg_index
// passed on. ReplacingMergeTree holds a re-ingested line twice until a
// merge folds them (same line, message and time: the same sorting key),
// and in that order the two copies come one after the other; a map of
// every line seen found them too, for a map insert per row (at 2M
// requests, 3 CPU-seconds and 360 MB of allocation). Two messages of one
// glued line are two rows (msg differs), not a copy.
type lineAt struct {
	ns, line uint64
	msg      uint8
	any      bool
}

// repeats reports whether the row (ns, line, msg) is a copy of the last
// one, and makes it the last one.
func (l *lineAt) repeats(ns, line uint64, msg uint8) bool {
	if l.any && l.ns == ns && l.line == line && l.msg == msg {
		return true
	}
	*l = lineAt{ns, line, msg, true}
	return false
}

// engineCols are the columns of anEngineEventsSQL, in its order.
type engineCols struct {
	ts, room, prompt, completion, cached, line proto.ColUInt64
	node, role, event, rid, finishType, msg    chblock.Str
	dp                                         proto.ColInt16
	status                                     proto.ColUInt16
	msgIndex                                   proto.ColUInt8
}

func (c *engineCols) results() proto.Results {
	return proto.Results{
		{Name: "ts_ns", Data: &c.ts}, {Name: "node", Data: &c.node}, {Name: "role", Data: &c.role},
		{Name: "dp_rank", Data: &c.dp}, {Name: "event", Data: &c.event}, {Name: "rid", Data: &c.rid},
		{Name: "bootstrap_room", Data: &c.room}, {Name: "prompt_tokens", Data: &c.prompt},
		{Name: "completion_tokens", Data: &c.completion}, {Name: "cached_tokens", Data: &c.cached},
		{Name: "finish_type", Data: &c.finishType}, {Name: "finish_message", Data: &c.msg},
		{Name: "status_code", Data: &c.status}, {Name: "line_id", Data: &c.line},
		{Name: "msg_index", Data: &c.msgIndex},
	}
}

// scanEngine runs an unordered engine_events select of anEngineEventsSQL's
// columns and hands its rows over in (ts_ns, line_id, msg_index) order,
// each once.
func (s *Store) scanEngine(ctx context.Context, query string, args []any, fn func(*domain.EngineEvent) error) error {
	var (
		c    engineCols
		read = sortedRows[domain.EngineEvent]{msg: func(e *domain.EngineEvent) uint8 { return e.Msg }}
	)
	err := s.scanBlocks(ctx, query, args, c.results(), func(n int) error {
		for i := range n {
			ns := c.ts[i]
			e := &domain.EngineEvent{
				TS: time.Unix(0, int64(ns)).UTC(), Node: c.node.Row(i), Role: c.role.Row(i),
				Event: c.event.Row(i), RID: c.rid.Row(i), FinishType: c.finishType.Row(i), FinishMsg: c.msg.Row(i),
				Room: c.room[i], Prompt: c.prompt[i], Completion: c.completion[i], Cached: c.cached[i],
				Line: c.line[i], DPRank: c.dp[i], Status: c.status[i], Msg: c.msgIndex[i],
			}
			read.add(ns, e.Line, e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load engine events: %w", err)
	}
	return read.each(fn)
}

// errCallback carries a callback's error through a scan, so it is returned
// as is while the scan's own errors are wrapped.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }

// callbackOr returns a callback's error as is and wraps any other with what
// was being read.
func callbackOr(err error, what string) error {
	var cb errCallback
	if errors.As(err, &cb) {
		return cb.err
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

const anTransferEventsSQL = `SELECT ts_ns, node, role, dp_rank, source, event, rid, bootstrap_room, other_room, metadata_index,
 reason, peer, nic, line_id, msg_index
FROM transfer_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)
ORDER BY ts_ns, line_id, msg_index`

// ScanTransferEvents streams the transfer lines of [from, to] (whole
// seconds) in time order, each line once.
func (s *Store) ScanTransferEvents(ctx context.Context, from, to time.Time, fn func(*domain.TransferEvent) error) error {
	return s.scanTransfer(ctx, anTransferEventsSQL, []any{uint32(from.Unix()), uint32(to.Unix())}, fn)
}

// scanTransfer runs a transfer_events select of anTransferEventsSQL's
// columns.
func (s *Store) scanTransfer(ctx context.Context, query string, args []any, fn func(*domain.TransferEvent) error) error {
	rows, done, err := s.Stream(ctx, query, args...)
	defer done()
	if err != nil {
		return fmt.Errorf("load transfer events: %w", err)
	}
	defer rows.Close()
	var last lineAt
	for rows.Next() {
		var t domain.TransferEvent
		var ns uint64
		if err := rows.Scan(&ns, &t.Node, &t.Role, &t.DPRank, &t.Source, &t.Event, &t.RID, &t.Room, &t.OtherRoom,
			&t.MetaIndex, &t.Reason, &t.Peer, &t.NIC, &t.Line, &t.Msg); err != nil {
			return fmt.Errorf("scan transfer event: %w", err)
		}
		if last.repeats(ns, t.Line, t.Msg) {
			continue
		}
		t.TS = time.Unix(0, int64(ns)).UTC()
		if err := fn(&t); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read transfer events: %w", err)
	}
	return nil
}

const anGatewaySQL = `SELECT ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens, cached_tokens,
 ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, line_id
FROM gateway_responses
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)`

// ScanGatewayResponses streams the gateway responses of the window
// [w.From, w.To) in time order, each (request id, line) once.
func (s *Store) ScanGatewayResponses(ctx context.Context, w domain.Window, fn func(*domain.GatewayResponse) error) error {
	return s.scanGateway(ctx, anGatewaySQL, []any{uint32(w.From.Unix()), uint32(w.To.Unix())}, func(g *domain.GatewayResponse) error {
		if !w.Contains(g.TS) {
			return nil
		}
		return fn(g)
	})
}

// gatewayCols are the columns of anGatewaySQL, in its order. Tenants,
// models and endpoints repeat across millions of rows: shared, not copied.
type gatewayCols struct {
	ts, prompt, completion, cached, room, line         proto.ColUInt64
	id, tenant, model, prefillEP, decodeEP, pRID, dRID chblock.Str
	status                                             proto.ColUInt16
	ttft, dur                                          proto.ColFloat64
}

func (c *gatewayCols) results() proto.Results {
	c.tenant.Intern, c.prefillEP.Intern, c.decodeEP.Intern = true, true, true
	return proto.Results{
		{Name: "ts_ns", Data: &c.ts}, {Name: "request_id", Data: &c.id}, {Name: "tenant", Data: &c.tenant},
		{Name: "model", Data: &c.model}, {Name: "status", Data: &c.status}, {Name: "prompt_tokens", Data: &c.prompt},
		{Name: "completion_tokens", Data: &c.completion}, {Name: "cached_tokens", Data: &c.cached},
		{Name: "ttft_ms", Data: &c.ttft}, {Name: "duration_ms", Data: &c.dur},
		{Name: "prefill_endpoint", Data: &c.prefillEP}, {Name: "decode_endpoint", Data: &c.decodeEP},
		{Name: "bootstrap_room", Data: &c.room}, {Name: "prefill_rid", Data: &c.pRID},
		{Name: "decode_rid", Data: &c.dRID}, {Name: "line_id", Data: &c.line},
	}
}

// scanGateway runs an unordered gateway_responses select of anGatewaySQL's
// columns and hands its rows over in (ts_ns, request_id, line_id) order,
// each (request id, line) once.
func (s *Store) scanGateway(ctx context.Context, query string, args []any, fn func(*domain.GatewayResponse) error) error {
	var c gatewayCols
	read := sortedRows[domain.GatewayResponse]{tie: func(a, b *domain.GatewayResponse) int {
		return strings.Compare(a.RequestID, b.RequestID)
	}}
	err := s.scanBlocks(ctx, query, args, c.results(), func(n int) error {
		for i := range n {
			ns := c.ts[i]
			g := &domain.GatewayResponse{
				TS: time.Unix(0, int64(ns)).UTC(), RequestID: c.id.Row(i), Tenant: c.tenant.Row(i), Model: c.model.Row(i),
				Status: c.status[i], Prompt: c.prompt[i], Completion: c.completion[i], Cached: c.cached[i],
				TTFTMs: c.ttft[i], DurationMs: c.dur[i], PrefillEP: c.prefillEP.Row(i), DecodeEP: c.decodeEP.Row(i),
				Room: c.room[i], PrefillRID: c.pRID.Row(i), DecodeRID: c.dRID.Row(i), Line: c.line[i],
			}
			read.add(ns, g.Line, g)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load gateway responses: %w", err)
	}
	return read.each(fn)
}

const anNodeEndpointsSQL = `SELECT node, argMax(endpoints, version) AS eps FROM nodes GROUP BY node ORDER BY node`

// NodeEndpoints maps each endpoint ingest recorded from the sources
// manifests (table nodes, latest version per node) to its node.
func (s *Store) NodeEndpoints(ctx context.Context) (map[string]string, error) {
	rows, err := s.Query(ctx, anNodeEndpointsSQL)
	if err != nil {
		return nil, fmt.Errorf("load node endpoints: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var node string
		var eps []string
		if err := rows.Scan(&node, &eps); err != nil {
			return nil, fmt.Errorf("load node endpoints: %w", err)
		}
		for _, ep := range eps {
			out[ep] = node
		}
	}
	return out, rows.Err()
}

// anSliceBucketsSQL lists the slices (ts divided by the slice length) of a
// window that hold gateway responses or engine request lines.
const anRoomOwnersSQL = `SELECT bootstrap_room, request_id, tenant, model, ts_ns, decode_endpoint
FROM gateway_responses
WHERE has(?, bootstrap_room)`

// RoomOwners returns the gateway responses of the given bootstrap rooms,
// whatever their time (Room, RequestID, Tenant, Model, TS and DecodeEP
// filled).
func (s *Store) RoomOwners(ctx context.Context, rooms []uint64) ([]domain.GatewayResponse, error) {
	if len(rooms) == 0 {
		return nil, nil
	}
	rows, err := s.Query(ctx, anRoomOwnersSQL, rooms)
	if err != nil {
		return nil, fmt.Errorf("owners of writer rooms: %w", err)
	}
	defer rows.Close()
	var out []domain.GatewayResponse
	for rows.Next() {
		var g domain.GatewayResponse
		var ns uint64
		if err := rows.Scan(&g.Room, &g.RequestID, &g.Tenant, &g.Model, &ns, &g.DecodeEP); err != nil {
			return nil, fmt.Errorf("scan room owner: %w", err)
		}
		g.TS = time.Unix(0, int64(ns)).UTC()
		out = append(out, g)
	}
	return out, rows.Err()
}

const (
	anDecodeNodesSQL = `SELECT DISTINCT node FROM engine_events
WHERE role = 'decode' AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND event IN ('received', 'finished')
ORDER BY node`
	anDecodeEventsWhere = `
WHERE role = 'decode' AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND event IN ('received', 'finished') AND node = ?`
	anDecodeEventsSQL = `SELECT event, rid, bootstrap_room, ts_ns, prompt_tokens, completion_tokens, finish_type, line_id, msg_index
FROM engine_events` + anDecodeEventsWhere + `
ORDER BY ts_ns, line_id, msg_index`
	anDecodeLinesPerMinuteSQL = bucketsFrom + `engine_events` + anDecodeEventsWhere + bucketsBy
)

// decodeLinesPerQuery bounds the lines one of a decode node's replay
// statements sorts. The server sorts all of them before it sends the first
// (18.16 cannot read in key order), about 125 bytes a line: 614 MB for one
// node's 4.9M lines at incident scale 100, so a node of 40M requests in
// the window would pass the server's default 10 GB per-query limit. Time
// spans of at most this many lines, each sorted, are the node's lines in
// order: ts is ts_ns's second.
var decodeLinesPerQuery = 2_000_000

// DecodeNodes lists, in order, the decode nodes with Receive or Finish
// lines in [from, to] (whole seconds): the allocator replay's streams.
func (s *Store) DecodeNodes(ctx context.Context, from, to time.Time) ([]string, error) {
	var nodes []string
	rows, err := s.Query(ctx, anDecodeNodesSQL, UnixArg(from), UnixArg(to))
	if err != nil {
		return nil, fmt.Errorf("list decode nodes for replay: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("scan decode node: %w", err)
		}
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list decode nodes for replay: %w", err)
	}
	return nodes, nil
}

// The deferred KV releases that timed out on a decode node (reference
// §c4), the first of each room: a few rows, whatever the window.
const anReleaseTimeoutsSQL = `SELECT bootstrap_room, min(ts_ns) FROM transfer_events
WHERE node = ? AND event = 'deferred_release_timeout' AND bootstrap_room != 0 AND ts >= toDateTime(?) AND ts <= toDateTime(?)
GROUP BY bootstrap_room`

// DecodeReleaseTimeouts is when a deferred KV release timed out on node in
// [from, to] (whole seconds), per room.
func (s *Store) DecodeReleaseTimeouts(ctx context.Context, from, to time.Time, node string) (map[uint64]time.Time, error) {
	rows, err := s.Query(ctx, anReleaseTimeoutsSQL, node, UnixArg(from), UnixArg(to))
	if err != nil {
		return nil, fmt.Errorf("deferred release timeouts of %s: %w", node, err)
	}
	defer rows.Close()
	out := map[uint64]time.Time{}
	for rows.Next() {
		var room, ns uint64
		if err := rows.Scan(&room, &ns); err != nil {
			return nil, fmt.Errorf("scan deferred release timeout: %w", err)
		}
		out[room] = time.Unix(0, int64(ns)).UTC()
	}
	return out, rows.Err()
}

// ScanDecodeNodeLines streams one decode node's Receive and Finish lines
// of [from, to] (whole seconds) in time order: what the allocator replay
// walks. Node, Event, RID, Room, TS, Prompt, Completion, FinishType, Line
// and Msg are filled; a row stored twice (not merged yet) comes twice, for
// the replay to skip. One query per node: a single ORDER BY node, ts over
// the window made the server sort every decode line before sending the
// first row, which at 5M requests outlasted the client's read timeout
// (18.16 cannot read in key order); a node's lines are a fraction of that
// sort, and nodes can be read side by side. A node of more than
// decodeLinesPerQuery lines is read in time spans of at most that many.
func (s *Store) ScanDecodeNodeLines(ctx context.Context, from, to time.Time, node string, fn func(*domain.EngineEvent) error) error {
	var (
		ts, room, prompt, completion, line proto.ColUInt64
		event, rid, finishType             chblock.Str
		msgIndex                           proto.ColUInt8
	)
	cols := proto.Results{
		{Name: "event", Data: &event}, {Name: "rid", Data: &rid}, {Name: "bootstrap_room", Data: &room},
		{Name: "ts_ns", Data: &ts}, {Name: "prompt_tokens", Data: &prompt}, {Name: "completion_tokens", Data: &completion},
		{Name: "finish_type", Data: &finishType}, {Name: "line_id", Data: &line}, {Name: "msg_index", Data: &msgIndex},
	}
	spans, err := s.cutByMinute(ctx, anDecodeLinesPerMinuteSQL, from, to, decodeLinesPerQuery, node)
	if err != nil {
		return fmt.Errorf("decode events of %s for replay: %w", node, err)
	}
	for k := range spans {
		err = s.scanBlocks(ctx, anDecodeEventsSQL, append(closedArgs(spans, k), node), cols, func(n int) error {
			for i := range n {
				// The node is the one asked for: not read, so not a string
				// allocated per line.
				e := domain.EngineEvent{
					Node: node, Role: "decode", DPRank: -1, TS: time.Unix(0, int64(ts[i])).UTC(),
					Event: event.Row(i), RID: rid.Row(i), Room: room[i], Prompt: prompt[i], Completion: completion[i],
					FinishType: finishType.Row(i), Line: line[i], Msg: msgIndex[i],
				}
				if err := fn(&e); err != nil {
					return errCallback{err}
				}
			}
			return nil
		})
		if err != nil {
			break
		}
	}
	return callbackOr(err, "load decode events of "+node+" for replay")
}

const anPageNodesSQL = `SELECT node, count() FROM page_events GROUP BY node`

// PageEventNodes lists the nodes that logged page-level events, in order
// (exact lineage applies to them only).
func (s *Store) PageEventNodes(ctx context.Context) ([]string, error) {
	rows, err := s.Query(ctx, anPageNodesSQL)
	if err != nil {
		return nil, fmt.Errorf("page event nodes: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		var c uint64
		if err := rows.Scan(&n, &c); err != nil {
			return nil, fmt.Errorf("scan page event nodes: %w", err)
		}
		if c > 0 {
			out = append(out, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read page event nodes: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

const anPageEventsSQL = `SELECT node, dp_rank, ts_ns, event, rid, bootstrap_room, pages, line_id, msg_index
FROM page_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)
ORDER BY node, dp_rank, ts_ns, line_id, msg_index`

// pageCols are the columns of anPageEventsSQL, in its order.
type pageCols struct {
	node, event, rid chblock.Str
	dp               proto.ColInt16
	ts, room, line   proto.ColUInt64
	pageIDs          proto.ColUInt32
	pages            *proto.ColArr[uint32]
	msg              proto.ColUInt8
}

func (c *pageCols) results() proto.Results {
	c.pages = &proto.ColArr[uint32]{Data: &c.pageIDs}
	return proto.Results{
		{Name: "node", Data: &c.node}, {Name: "dp_rank", Data: &c.dp}, {Name: "ts_ns", Data: &c.ts},
		{Name: "event", Data: &c.event}, {Name: "rid", Data: &c.rid}, {Name: "bootstrap_room", Data: &c.room},
		{Name: "pages", Data: c.pages}, {Name: "line_id", Data: &c.line}, {Name: "msg_index", Data: &c.msg},
	}
}

// pageSortSpill is where the server's sort of the page events spills to
// its disk. The read is ordered by the table's key, which 18.16 cannot read
// in order, so it sorts the window's page events whole: on a 10k-request
// incident 48,799 rows of 71 MiB took 237–308 MiB of the server's memory,
// and a window a thousand times that size would exceed any server's
// max_memory_usage. Past this many bytes the server sorts in runs written
// to its tmp_path and merges them (TestScanPathsAgree checks that the
// setting is sent and the events are unchanged; how much memory a real
// spill takes was not measured).
var pageSortSpill = 512 << 20

// ScanPageEvents streams the page events of [from, to] (whole seconds)
// ordered by node, DP rank, then time: one lane after the other. A row
// stored twice (not merged yet) comes twice, next to itself. The event
// and its Pages are valid only during fn.
//
// Page events are the one table with a line per allocator operation (at
// page size 1, a line per token), read a block at a time: through the
// driver's reflective row scan, every page of every row was a boxed
// value, and the scan took 90% of an analysis with page events (6.8 of
// 7.4 CPU-s on a 10k-request incident of 830k lines).
func (s *Store) ScanPageEvents(ctx context.Context, from, to time.Time, fn func(*domain.PageEvent) error) error {
	ctx = WithSettings(ctx, clickhouse.Settings{"max_bytes_before_external_sort": pageSortSpill})
	var c pageCols
	err := s.scanBlocks(ctx, anPageEventsSQL, []any{UnixArg(from), UnixArg(to)}, c.results(), func(n int) error {
		var e domain.PageEvent
		for i := range n {
			start, end := uint64(0), c.pages.Offsets[i]
			if i > 0 {
				start = c.pages.Offsets[i-1]
			}
			e = domain.PageEvent{TS: time.Unix(0, int64(c.ts[i])).UTC(), Node: c.node.Row(i), DPRank: c.dp[i],
				Event: c.event.Row(i), RID: c.rid.Row(i), Room: c.room[i], Pages: c.pageIDs[start:end:end],
				Line: c.line[i], Msg: c.msg[i]}
			if err := fn(&e); err != nil {
				return errCallback{err}
			}
		}
		return nil
	})
	return callbackOr(err, "load page events")
}

const anCanaryProbesSQL = `SELECT probe_id, ts_ns, identity, endpoint, kind, stream, marker, threshold_tokens, threshold_node,
 prompt_tokens, completion_tokens, http_status, response_text, foreign_markers, verdict
FROM probes
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND verdict IN ('leak', 'over_limit_served')
ORDER BY ts_ns, probe_id`

// ProbeVerdicts reads the canary probes of [from, to] (whole seconds)
// whose verdict is a leak or an over-limit prompt served, in time order.
func (s *Store) ProbeVerdicts(ctx context.Context, from, to time.Time) ([]domain.ProbeVerdict, error) {
	rows, err := s.Query(ctx, anCanaryProbesSQL, UnixArg(from), UnixArg(to))
	if err != nil {
		return nil, fmt.Errorf("canary probes: %w", err)
	}
	defer rows.Close()
	var out []domain.ProbeVerdict
	for rows.Next() {
		var p domain.ProbeVerdict
		var ns uint64
		var stream uint8
		if err := rows.Scan(&p.ID, &ns, &p.Identity, &p.Endpoint, &p.Kind, &stream, &p.Marker, &p.ThresholdTokens,
			&p.ThresholdNode, &p.Prompt, &p.Completion, &p.HTTPStatus, &p.Answer, &p.ForeignMarkers, &p.Verdict); err != nil {
			return nil, fmt.Errorf("scan canary probe: %w", err)
		}
		p.TS, p.Stream = time.Unix(0, int64(ns)).UTC(), stream == 1
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read canary probes: %w", err)
	}
	return out, nil
}

const anCanaryMarkersSQL = `SELECT marker, probe_id, ts_ns, identity, kind FROM probes WHERE has(?, marker)`

// ProbeMarkers maps each of the given markers to the probe that sent it
// (markers no probe on record sent are absent).
func (s *Store) ProbeMarkers(ctx context.Context, markers []string) (map[string]domain.ProbeMarker, error) {
	out := map[string]domain.ProbeMarker{}
	if len(markers) == 0 {
		return out, nil
	}
	rows, err := s.Query(ctx, anCanaryMarkersSQL, markers)
	if err != nil {
		return nil, fmt.Errorf("canary probe markers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m domain.ProbeMarker
		var ns uint64
		if err := rows.Scan(&m.Marker, &m.ProbeID, &ns, &m.Identity, &m.Kind); err != nil {
			return nil, fmt.Errorf("scan probe marker: %w", err)
		}
		m.TS = time.Unix(0, int64(ns)).UTC()
		out[m.Marker] = m
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read probe markers: %w", err)
	}
	return out, nil
}
