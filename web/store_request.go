package web

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// TimelineEvent is one step of a request on one lane.
type TimelineEvent struct {
	Lane   string    `json:"lane"` // gateway, prefill, transfer, decode
	TS     time.Time `json:"ts"`
	TSNS   uint64    `json:"ts_ns,string"`
	Node   string    `json:"node"`
	DPRank int16     `json:"dp_rank"`
	Event  string    `json:"event"`
	RID    string    `json:"rid"`
	Detail string    `json:"detail"`
	LineID U64       `json:"line_id"`
}

// RawLine is an evidence line exactly as ingested.
type RawLine struct {
	TS          time.Time `ch:"ts" json:"ts"`
	TSNS        uint64    `ch:"ts_ns" json:"ts_ns,string"`
	Node        string    `ch:"node" json:"node"`
	Role        string    `ch:"role" json:"role"`
	LogFormat   string    `ch:"log_format" json:"log_format"`
	Source      string    `ch:"source" json:"source"`
	FileDigest  string    `ch:"file_digest" json:"file_digest"`
	ByteOffset  uint64    `ch:"byte_offset" json:"byte_offset"`
	LineNo      uint64    `ch:"line_no" json:"line_no"`
	LineID      uint64    `ch:"line_id" json:"line_id,string"`
	Kind        string    `ch:"kind" json:"kind"`
	ParseStatus string    `ch:"parse_status" json:"parse_status"`
	Line        string    `ch:"line" json:"line"`
}

// NodeLimits are the limits of the boot in force on a node at a time.
type NodeLimits struct {
	Node              string    `ch:"node" json:"node"`
	Role              string    `ch:"role" json:"role"`
	BootTS            time.Time `ch:"boot_ts" json:"boot_ts"`
	BootID            string    `ch:"boot_id" json:"boot_id"`
	Version           string    `ch:"sglang_version" json:"sglang_version"`
	ContextLen        uint64    `ch:"context_len" json:"context_len"`
	MaxTotalNumTokens uint64    `ch:"max_total_num_tokens" json:"max_total_num_tokens"`
	MaxReqInputLen    uint64    `ch:"max_req_input_len" json:"max_req_input_len"`
	MaxPrefillTokens  uint64    `ch:"max_prefill_tokens" json:"max_prefill_tokens"`
	MaxRunning        uint64    `ch:"max_running_requests" json:"max_running_requests"`
	KVPoolTokens      uint64    `ch:"kv_pool_tokens" json:"kv_pool_tokens"`
	PageSize          uint32    `ch:"page_size" json:"page_size"`
	DPSize            uint16    `ch:"dp_size" json:"dp_size"`
	AllowAutoTruncate uint8     `ch:"allow_auto_truncate" json:"allow_auto_truncate"`
}

// PoolSmaller reports a KV pool smaller than the context length: a prompt
// can pass the context check and still not fit the pool.
func (n NodeLimits) PoolSmaller() bool { return n.MaxTotalNumTokens < n.ContextLen }

// ContextRow is another request on the same decode instance and rank near
// the request being viewed.
type ContextRow struct {
	TS        time.Time `ch:"ts" json:"ts"`
	TSNS      uint64    `ch:"ts_ns" json:"ts_ns,string"`
	Event     string    `ch:"event" json:"event"`
	RID       string    `ch:"rid" json:"rid"`
	Room      uint64    `ch:"ctx_room" json:"bootstrap_room,string"`
	Prompt    uint64    `ch:"prompt_tokens" json:"prompt_tokens"`
	Finish    string    `ch:"finish_type" json:"finish_type"`
	Tenant    string    `ch:"gw_tenant" json:"tenant"`
	RequestID string    `ch:"gw_request_id" json:"request_id"`
	LineID    uint64    `ch:"line_id" json:"line_id,string"`
	Same      bool      `json:"same_request"`
}

// Timeline is everything the request page shows.
type Timeline struct {
	Request        RequestRow      `json:"request"`
	Events         []TimelineEvent `json:"events"`
	Lines          []RawLine       `json:"evidence_lines"`
	Limits         []NodeLimits    `json:"limits"`
	Findings       []Finding       `json:"findings"`
	DecodeNode     string          `json:"decode_node"`
	DecodeRank     int16           `json:"decode_dp_rank"`
	ContextSeconds int             `json:"context_seconds"`
	Context        []ContextRow    `json:"context"`
}

type engineEventRow struct {
	TS         time.Time `ch:"ts"`
	TSNS       uint64    `ch:"ts_ns"`
	Node       string    `ch:"node"`
	Role       string    `ch:"role"`
	DPRank     int16     `ch:"dp_rank"`
	Event      string    `ch:"event"`
	RID        string    `ch:"rid"`
	Prompt     uint64    `ch:"prompt_tokens"`
	Completion uint64    `ch:"completion_tokens"`
	Cached     uint64    `ch:"cached_tokens"`
	Limit      uint64    `ch:"limit_tokens"`
	Finish     string    `ch:"finish_type"`
	Message    string    `ch:"finish_message"`
	StatusCode uint16    `ch:"status_code"`
	LineID     uint64    `ch:"line_id"`
}

type transferEventRow struct {
	TS     time.Time `ch:"ts"`
	TSNS   uint64    `ch:"ts_ns"`
	Node   string    `ch:"node"`
	Role   string    `ch:"role"`
	DPRank int16     `ch:"dp_rank"`
	Source string    `ch:"source"`
	Event  string    `ch:"event"`
	RID    string    `ch:"rid"`
	Other  uint64    `ch:"other_room"`
	Reason string    `ch:"reason"`
	Peer   string    `ch:"peer"`
	LineID uint64    `ch:"line_id"`
}

// requestSlack bounds the engine-side search around a gateway response: the
// engines logged the request before the gateway answered, and clocks skew.
const requestSlack = time.Hour

const rawCols = `ts, ts_ns, node, role, log_format, source, file_digest, byte_offset, line_no, line_id, kind, parse_status, line`

// Request finds one gateway request by its request id. Several rows (the
// same id from two gateways) are resolved to the newest.
func (s chStore) Request(ctx context.Context, requestID string) (RequestRow, error) {
	var rows []RequestRow
	err := s.c.Select(ctx, &rows, "SELECT "+requestCols+" FROM gateway_responses FINAL WHERE request_id = ? ORDER BY ts_ns DESC LIMIT 1", requestID)
	if err != nil {
		return RequestRow{}, fmt.Errorf("request: %w", err)
	}
	if len(rows) == 0 {
		return RequestRow{}, errNotFound
	}
	return rows[0], nil
}

// RequestTimeline assembles the swimlanes of one request from the raw
// tables (request_facts, once analyze fills it, holds the same links).
func (s chStore) RequestTimeline(ctx context.Context, requestID string, contextWindow time.Duration) (*Timeline, error) {
	req, err := s.Request(ctx, requestID)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{Request: req, ContextSeconds: int(contextWindow.Seconds()), DecodeRank: -1}
	lineIDs := []uint64{req.LineID}
	tl.Events = append(tl.Events, TimelineEvent{Lane: "gateway", TS: req.TS, TSNS: req.TSNS, Node: req.Gateway, DPRank: -1,
		Event: fmt.Sprintf("response %d", req.Status), Detail: fmt.Sprintf("prompt %d, completion %d, cached %d, ttft %.0f ms, %.0f ms",
			req.PromptTokens, req.CompletionTokens, req.CachedTokens, req.TTFTMS, req.DurationMS), LineID: U64(req.LineID)})
	from, to := utc(req.TS).Add(-requestSlack), utc(req.TS).Add(requestSlack)
	nodes := map[string]time.Time{}
	if req.Room != 0 {
		var ev []engineEventRow
		err := s.c.Select(ctx, &ev, `SELECT ts, ts_ns, node, role, dp_rank, event, rid, prompt_tokens, completion_tokens,
 cached_tokens, limit_tokens, finish_type, finish_message, status_code, line_id
FROM engine_events FINAL WHERE bootstrap_room = ? AND ts >= ? AND ts <= ? ORDER BY ts_ns`, req.Room, from, to)
		if err != nil {
			return nil, fmt.Errorf("engine events: %w", err)
		}
		for _, e := range ev {
			lane := e.Role
			if lane != "prefill" {
				lane = "decode"
			}
			if e.Role == "decode" && tl.DecodeNode == "" {
				tl.DecodeNode, tl.DecodeRank = e.Node, e.DPRank
			}
			nodes[e.Node] = e.TS
			d := fmt.Sprintf("prompt %d", e.Prompt)
			if e.Limit > 0 {
				d += fmt.Sprintf(", limit %d", e.Limit)
			}
			if e.Finish != "" {
				d += ", finish " + e.Finish
			}
			if e.StatusCode != 0 {
				d += fmt.Sprintf(", status %d", e.StatusCode)
			}
			if e.Message != "" {
				d += ": " + e.Message
			}
			tl.Events = append(tl.Events, TimelineEvent{Lane: lane, TS: e.TS, TSNS: e.TSNS, Node: e.Node, DPRank: e.DPRank,
				Event: e.Event, RID: e.RID, Detail: d, LineID: U64(e.LineID)})
			lineIDs = append(lineIDs, e.LineID)
		}
		var tr []transferEventRow
		err = s.c.Select(ctx, &tr, `SELECT ts, ts_ns, node, role, dp_rank, source, event, rid, other_room, reason, peer, line_id
FROM transfer_events FINAL WHERE bootstrap_room = ? AND ts >= ? AND ts <= ? ORDER BY ts_ns`, req.Room, from, to)
		if err != nil {
			return nil, fmt.Errorf("transfer events: %w", err)
		}
		for _, e := range tr {
			d := e.Reason
			if e.Other != 0 {
				d += fmt.Sprintf(" (other room %d)", e.Other)
			}
			if e.Peer != "" {
				d += " peer " + e.Peer
			}
			tl.Events = append(tl.Events, TimelineEvent{Lane: "transfer", TS: e.TS, TSNS: e.TSNS, Node: e.Node, DPRank: e.DPRank,
				Event: e.Source + " " + e.Event, RID: e.RID, Detail: d, LineID: U64(e.LineID)})
			lineIDs = append(lineIDs, e.LineID)
		}
	}
	sort.SliceStable(tl.Events, func(i, j int) bool { return tl.Events[i].TSNS < tl.Events[j].TSNS })
	if tl.Lines, err = s.Lines(ctx, lineIDs); err != nil {
		return nil, err
	}
	for node, at := range nodes {
		l, err := s.limitsAt(ctx, node, at)
		if err != nil {
			return nil, err
		}
		if l != nil {
			tl.Limits = append(tl.Limits, *l)
		}
	}
	sort.Slice(tl.Limits, func(i, j int) bool { return tl.Limits[i].Node < tl.Limits[j].Node })
	if tl.Findings, err = s.findingsFor(ctx, req); err != nil {
		return nil, err
	}
	if tl.DecodeNode != "" && contextWindow > 0 {
		if tl.Context, err = s.decodeContext(ctx, tl.DecodeNode, tl.DecodeRank, req.TS, contextWindow); err != nil {
			return nil, err
		}
		for i := range tl.Context {
			tl.Context[i].Same = tl.Context[i].Room == req.Room
		}
	}
	return tl, nil
}

// Lines reads evidence lines by id, oldest first.
func (s chStore) Lines(ctx context.Context, ids []uint64) ([]RawLine, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []RawLine
	if err := s.c.Select(ctx, &out, "SELECT "+rawCols+" FROM raw_lines FINAL WHERE has(?, line_id) ORDER BY ts_ns, line_id", ids); err != nil {
		return nil, fmt.Errorf("raw lines: %w", err)
	}
	return out, nil
}

// limitsAt is the boot of node in force at t: the latest boot at or before t.
func (s chStore) limitsAt(ctx context.Context, node string, t time.Time) (*NodeLimits, error) {
	var out []NodeLimits
	err := s.c.Select(ctx, &out, `SELECT node, role, boot_ts, boot_id, sglang_version, context_len, max_total_num_tokens,
 max_req_input_len, max_prefill_tokens, max_running_requests, kv_pool_tokens, page_size, dp_size, allow_auto_truncate
FROM node_boots FINAL WHERE node = ? AND boot_ts <= ? ORDER BY boot_ts DESC LIMIT 1`, node, utc(t).Add(time.Second))
	if err != nil {
		return nil, fmt.Errorf("node limits: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

// decodeContext lists the engine events on node/rank within ±window of t,
// with the tenant and gateway request id of each (by bootstrap room).
func (s chStore) decodeContext(ctx context.Context, node string, rank int16, t time.Time, window time.Duration) ([]ContextRow, error) {
	from, to := utc(t).Add(-window-requestSlack/60), utc(t).Add(window)
	var out []ContextRow
	err := s.c.Select(ctx, &out, `SELECT ts, ts_ns, event, rid, ctx_room, prompt_tokens, finish_type, gw_tenant, gw_request_id, line_id
FROM (
  SELECT ts, ts_ns, event, rid, bootstrap_room, bootstrap_room AS ctx_room, prompt_tokens, finish_type, line_id
  FROM engine_events FINAL
  WHERE node = ? AND dp_rank = ? AND ts >= ? AND ts <= ? AND bootstrap_room != 0
) AS ev ALL LEFT JOIN (
  SELECT bootstrap_room, any(tenant) AS gw_tenant, any(request_id) AS gw_request_id
  FROM gateway_responses FINAL
  WHERE ts >= ? AND ts <= ?
  GROUP BY bootstrap_room
) AS gw USING bootstrap_room
ORDER BY ts_ns LIMIT 2000`, node, rank, from, to, from, to.Add(requestSlack))
	if err != nil {
		return nil, fmt.Errorf("decode context: %w", err)
	}
	return out, nil
}
