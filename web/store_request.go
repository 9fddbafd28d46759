package web

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	// Sources are the tenants on the other side of this request, from the
	// affected reconstruction; OwnDataOnly marks a request served from
	// stale pages that held only its own tenant's data.
	Sources     []Source `json:"sources"`
	OwnDataOnly bool     `json:"own_data_only"`
	// Pool is the decode rank's KV pool usage from its batch lines around
	// the request (±poolWindow).
	Pool []PoolPoint `json:"decode_pool"`
}

// PoolPoint is one batch line's pool usage on a decode rank.
type PoolPoint struct {
	TS      time.Time `ch:"ts" json:"ts"`
	TSNS    uint64    `ch:"ts_ns" json:"ts_ns,string"`
	Usage   float64   `ch:"token_usage" json:"token_usage"`
	Tokens  uint64    `ch:"num_token" json:"num_token"`
	Running int32     `ch:"running_req" json:"running_req"`
	LineID  uint64    `ch:"line_id" json:"line_id,string"`
}

// poolWindow is how far around a request its decode rank's pool is drawn.
const poolWindow = 5 * time.Minute

// decodePool reads the rank's batch lines by (node, ts range): a key read.
func (s chStore) decodePool(ctx context.Context, node string, rank int16, t time.Time) ([]PoolPoint, error) {
	var out []PoolPoint
	err := s.c.Select(ctx, &out, `SELECT ts, ts_ns, token_usage, num_token, running_req, line_id FROM batch_stats
WHERE node = ? AND ts >= ? AND ts <= ? AND (dp_rank = ? OR dp_rank < 0)
ORDER BY ts_ns LIMIT 1 BY line_id LIMIT 2000`, node, utc(t).Add(-poolWindow), utc(t).Add(poolWindow), rank)
	if err != nil {
		return nil, fmt.Errorf("decode pool: %w", err)
	}
	return out, nil
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

// idRef is where an id was seen: an id_index row.
type idRef struct {
	ID     string    `ch:"id"`
	Kind   string    `ch:"id_kind"`
	Node   string    `ch:"node"`
	TS     time.Time `ch:"ts"`
	LineID uint64    `ch:"line_id"`
}

// idRefs reads id_index for ids of the given kinds: a primary-key read
// (the table is sorted by id, id_kind), whatever the size of the data.
func (s chStore) idRefs(ctx context.Context, kinds []string, ids []string) ([]idRef, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	// A literal IN list, one placeholder per id: ClickHouse uses the
	// primary key for "id IN (...)" but not for has(array, id).
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, kinds)
	var out []idRef
	err := s.c.Select(ctx, &out, `SELECT id, id_kind, node, ts, line_id FROM id_index
WHERE id IN (`+placeholders(len(ids))+`) AND has(?, id_kind) LIMIT 10000`, args...)
	if err != nil {
		return nil, fmt.Errorf("id index: %w", err)
	}
	return out, nil
}

// Request finds one gateway request by its request id: id_index gives the
// gateway line's time, which bounds the read of gateway_responses to the
// partition and granules around it. Several rows (the same id from two
// gateways) are resolved to the newest.
func (s chStore) Request(ctx context.Context, requestID, tenant string) (RequestRow, error) {
	refs, err := s.idRefs(ctx, []string{"request_id"}, []string{requestID})
	if err != nil {
		return RequestRow{}, err
	}
	if len(refs) == 0 {
		return RequestRow{}, errNotFound
	}
	from, to := refs[0].TS, refs[0].TS
	for _, r := range refs {
		from, to = minTime(from, r.TS), maxTime(to, r.TS)
	}
	var rows []RequestRow
	// With the tenant this reads by the table's key (tenant, ts, ...);
	// without it, the granules of the partition that may hold the time.
	if tenant != "" {
		err = s.c.Select(ctx, &rows, "SELECT "+requestCols+` FROM gateway_responses
WHERE tenant = ? AND ts >= ? AND ts <= ? AND request_id = ? ORDER BY ts_ns DESC LIMIT 1`, tenant, utc(from), utc(to).Add(time.Second), requestID)
		if err != nil {
			return RequestRow{}, fmt.Errorf("request: %w", err)
		}
	}
	if len(rows) == 0 {
		err = s.c.Select(ctx, &rows, "SELECT "+requestCols+` FROM gateway_responses
PREWHERE request_id = ? WHERE ts >= ? AND ts <= ? ORDER BY ts_ns DESC LIMIT 1`, requestID, utc(from), utc(to).Add(time.Second))
		if err != nil {
			return RequestRow{}, fmt.Errorf("request: %w", err)
		}
	}
	if len(rows) == 0 {
		return RequestRow{}, errNotFound
	}
	return rows[0], nil
}

// The keyed reads below do not use FINAL: on 18.16 FINAL merges every part
// of the partitions it touches, which costs more than the read itself. Rows
// a Replacing engine has not folded yet are identical copies (same line id)
// or older versions, so "LIMIT 1 BY line_id", "ORDER BY version DESC" or a
// map by line id does the folding.

// factRow is the part of a request_facts row the request page reads: the
// correlation ingest and analyze already made, so the page does not redo it.
type factRow struct {
	PrefillNode string   `ch:"prefill_node"`
	PrefillRID  string   `ch:"prefill_rid"`
	DecodeNode  string   `ch:"decode_node"`
	DecodeRID   string   `ch:"decode_rid"`
	DecodeRank  int16    `ch:"decode_dp_rank"`
	LineIDs     []uint64 `ch:"line_ids"`
}

// fact reads the request's request_facts row (the newest version), bounded
// to the partition of the gateway's time.
func (s chStore) fact(ctx context.Context, req RequestRow) (*factRow, error) {
	var out []factRow
	t := utc(req.TS)
	err := s.c.Select(ctx, &out, `SELECT prefill_node, prefill_rid, decode_node, decode_rid, decode_dp_rank, line_ids
FROM request_facts WHERE tenant = ? AND request_key = ? AND ts >= ? AND ts <= ? ORDER BY version DESC LIMIT 1`,
		req.Tenant, req.RequestID, t, t.Add(time.Second))
	if err != nil {
		return nil, fmt.Errorf("request facts: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

// span is a time range of lines to read (a ts range on tables sorted by
// (node, ts, ...): node is low-cardinality, so ClickHouse reads only the
// granules in the range, per node), on the given nodes if any are known.
type span struct {
	From, To time.Time
	Nodes    []string
}

// lineSlack widens a request's known line times: lines without an id of
// their own (a rejection message) sit close to the ones with one.
const lineSlack = 2 * time.Minute

// RequestTimeline assembles the swimlanes of one request from keys only:
// id_index for the gateway line and the request's room and rids,
// request_facts for every line ingest or analysis linked to it (including
// lines that carry no id, like a prefill rejection), then the event tables
// and raw_lines by (time range, line id).
func (s chStore) RequestTimeline(ctx context.Context, requestID, tenant string, contextWindow time.Duration) (*Timeline, error) {
	req, err := s.Request(ctx, requestID, tenant)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{Request: req, ContextSeconds: int(contextWindow.Seconds()), DecodeRank: -1}
	tl.Events = append(tl.Events, TimelineEvent{Lane: "gateway", TS: req.TS, TSNS: req.TSNS, Node: req.Gateway, DPRank: -1,
		Event: fmt.Sprintf("response %d", req.Status), Detail: fmt.Sprintf("prompt %d, completion %d, cached %d, ttft %.0f ms, %.0f ms",
			req.PromptTokens, req.CompletionTokens, req.CachedTokens, req.TTFTMS, req.DurationMS), LineID: U64(req.LineID)})
	f, err := s.fact(ctx, req)
	if err != nil {
		return nil, err
	}
	ids := map[uint64]bool{req.LineID: true}
	keys := []string{}
	if req.Room != 0 {
		keys = append(keys, strconv.FormatUint(req.Room, 10))
	}
	for _, rid := range []string{req.PrefillRID, req.DecodeRID} {
		if rid != "" {
			keys = append(keys, rid)
		}
	}
	if f != nil {
		for _, id := range f.LineIDs {
			ids[id] = true
		}
		for _, rid := range []string{f.PrefillRID, f.DecodeRID} {
			if rid != "" {
				keys = append(keys, rid)
			}
		}
		tl.DecodeNode, tl.DecodeRank = f.DecodeNode, f.DecodeRank
	}
	// Four independent reads, in parallel: the lines and their events,
	// the limits in force, the findings, and the decode rank's context.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	var nodes map[string]time.Time
	var limits []NodeLimits
	var decodeAt decodeRef
	wg.Add(4)
	go func() {
		defer wg.Done()
		var known []string
		if f != nil {
			known = []string{f.PrefillNode, f.DecodeNode}
		}
		nodes, decodeAt, errs[0] = s.requestLines(ctx, tl, ids, keys, known)
	}()
	go func() {
		defer wg.Done()
		// The nodes are those the fact names; the request's own time picks
		// the boot in force.
		var ns []string
		if f != nil {
			ns = append(ns, f.PrefillNode, f.DecodeNode)
		}
		limits, errs[1] = s.limitsAt(ctx, ns, req.TS)
	}()
	go func() {
		defer wg.Done()
		tl.Findings, errs[2] = s.findingsFor(ctx, req)
	}()
	go func() {
		defer wg.Done()
		if tl.DecodeNode != "" && contextWindow > 0 {
			tl.Context, errs[3] = s.decodeContext(ctx, tl.DecodeNode, tl.DecodeRank, req.TS, contextWindow)
		}
		if tl.DecodeNode != "" && errs[3] == nil {
			tl.Pool, errs[3] = s.decodePool(ctx, tl.DecodeNode, tl.DecodeRank, req.TS)
		}
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Without a fact the nodes come from the events found by room and rid.
	if f == nil && len(nodes) > 0 {
		tl.DecodeNode, tl.DecodeRank = decodeAt.Node, decodeAt.Rank
		ns := make([]string, 0, len(nodes))
		for n := range nodes {
			ns = append(ns, n)
		}
		if limits, err = s.limitsAt(ctx, ns, req.TS); err != nil {
			return nil, err
		}
		if tl.DecodeNode != "" && contextWindow > 0 {
			if tl.Context, err = s.decodeContext(ctx, tl.DecodeNode, tl.DecodeRank, req.TS, contextWindow); err != nil {
				return nil, err
			}
		}
	}
	tl.Limits = limits
	fids := make([]string, len(tl.Findings))
	for i, f := range tl.Findings {
		fids[i] = f.FindingID
	}
	if tl.Sources, tl.OwnDataOnly, err = s.sourcesFor(ctx, req.RequestID, req.Tenant, fids); err != nil {
		return nil, err
	}
	fillForeign(tl.Findings, tl.Sources)
	sort.SliceStable(tl.Events, func(i, j int) bool { return tl.Events[i].TSNS < tl.Events[j].TSNS })
	for i := range tl.Context {
		tl.Context[i].Same = tl.Context[i].Room == req.Room
	}
	return tl, nil
}

// decodeRef is the decode instance and rank a request ran on.
type decodeRef struct {
	Node string
	Rank int16
}

// requestLines reads the request's lines: those the fact linked (ids) and
// those carrying its room or rids (keys) near its time, then the engine
// and transfer events among them.
func (s chStore) requestLines(ctx context.Context, tl *Timeline, ids map[uint64]bool, keys, nodes []string) (map[string]time.Time, decodeRef, error) {
	req := tl.Request
	// The room and rids add lines the correlator may not have linked (a
	// transfer retry); only those near the request count, as rids and
	// rooms are reused over weeks.
	refs, err := s.idRefs(ctx, []string{"room", "rid"}, uniqStrings(keys))
	if err != nil {
		return nil, decodeRef{}, err
	}
	sp := span{From: utc(req.TS).Add(-lineSlack), To: utc(req.TS).Add(lineSlack), Nodes: append([]string{req.Gateway}, nodes...)}
	for _, r := range refs {
		if r.TS.Before(req.TS.Add(-requestSlack)) || r.TS.After(req.TS.Add(requestSlack)) {
			continue
		}
		ids[r.LineID] = true
		sp.From, sp.To = minTime(sp.From, r.TS.Add(-lineSlack)), maxTime(sp.To, r.TS.Add(lineSlack))
		sp.Nodes = append(sp.Nodes, r.Node)
	}
	sp.Nodes = uniqStrings(nonEmpty(sp.Nodes))
	lineIDs := make([]uint64, 0, len(ids))
	for id := range ids {
		lineIDs = append(lineIDs, id)
	}
	sort.Slice(lineIDs, func(i, j int) bool { return lineIDs[i] < lineIDs[j] })
	if tl.Lines, err = s.Lines(ctx, lineIDs, sp); err != nil {
		return nil, decodeRef{}, err
	}
	// The event tables are read over the span and nodes the lines were
	// found in.
	if len(tl.Lines) > 0 {
		sp = span{From: tl.Lines[0].TS, To: tl.Lines[0].TS}
	}
	for _, l := range tl.Lines {
		sp.From, sp.To = minTime(sp.From, l.TS), maxTime(sp.To, l.TS)
		sp.Nodes = append(sp.Nodes, l.Node)
	}
	sp.Nodes = uniqStrings(sp.Nodes)
	return s.requestEvents(ctx, tl, lineIDs, sp)
}

// requestEvents adds the engine and transfer events among lineIDs to the
// timeline and returns the engine nodes seen, with a time on each.
func (s chStore) requestEvents(ctx context.Context, tl *Timeline, lineIDs []uint64, sp span) (map[string]time.Time, decodeRef, error) {
	nodes := map[string]time.Time{}
	var decodeAt decodeRef
	where, args := spanWhere([]span{sp})
	if where == "" {
		return nodes, decodeAt, nil
	}
	var ev []engineEventRow
	err := s.c.Select(ctx, &ev, `SELECT ts, ts_ns, node, role, dp_rank, event, rid, prompt_tokens, completion_tokens,
 cached_tokens, limit_tokens, finish_type, finish_message, status_code, line_id
FROM engine_events WHERE `+where+` AND has(?, line_id) ORDER BY ts_ns LIMIT 1 BY line_id`, append(args, lineIDs)...)
	if err != nil {
		return nil, decodeAt, fmt.Errorf("engine events: %w", err)
	}
	for _, e := range ev {
		lane := e.Role
		if lane != "prefill" {
			lane = "decode"
		}
		if e.Role == "decode" && decodeAt.Node == "" {
			decodeAt = decodeRef{e.Node, e.DPRank}
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
	}
	var tr []transferEventRow
	err = s.c.Select(ctx, &tr, `SELECT ts, ts_ns, node, role, dp_rank, source, event, rid, other_room, reason, peer, line_id
FROM transfer_events WHERE `+where+` AND has(?, line_id) ORDER BY ts_ns LIMIT 1 BY line_id`, append(args, lineIDs)...)
	if err != nil {
		return nil, decodeAt, fmt.Errorf("transfer events: %w", err)
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
	}
	return nodes, decodeAt, nil
}

// Lines reads evidence lines by id, oldest first. raw_lines is sorted by
// (node, ts, line_id), so a line is found by key only with its time: the
// caller gives the spans its lines are expected in. Lines not found there
// are looked up near the boots that cite them (node_boots.line_ids: boot
// lines are evidence of the limits) and, last, by a scan of line ids,
// which is slow at scale and logged by the caller's timing.
func (s chStore) Lines(ctx context.Context, ids []uint64, near ...span) ([]RawLine, error) {
	return s.linesOn(ctx, ids, nil, near...)
}

// linesOn is Lines with the nodes the lines are known to be on: before
// the last resort, the lines still missing are looked for on those nodes
// only (node leads raw_lines' key, so that reads their part of the table).
func (s chStore) linesOn(ctx context.Context, ids []uint64, nodes []string, near ...span) ([]RawLine, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []RawLine
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	read := func(where string, args ...any) error {
		missing := make([]uint64, 0, len(want))
		for id := range want {
			missing = append(missing, id)
		}
		var got []RawLine
		if err := s.c.Select(ctx, &got, "SELECT "+rawCols+" FROM raw_lines WHERE "+where+" AND has(?, line_id)",
			append(args, missing)...); err != nil {
			return fmt.Errorf("raw lines: %w", err)
		}
		for _, l := range got {
			if want[l.LineID] {
				delete(want, l.LineID)
				out = append(out, l)
			}
		}
		return nil
	}
	if w, args := spanWhere(near); w != "" {
		if err := read(w, args...); err != nil {
			return nil, err
		}
	}
	if len(want) > 0 {
		boots, err := s.bootSpans(ctx, want)
		if err != nil {
			return nil, err
		}
		if w, args := spanWhere(boots); w != "" {
			if err := read(w, args...); err != nil {
				return nil, err
			}
		}
	}
	if nodes = uniqStrings(nonEmpty(nodes)); len(want) > 0 && len(nodes) > 0 {
		args := make([]any, len(nodes))
		for i, n := range nodes {
			args[i] = n
		}
		if err := read("node IN ("+placeholders(len(nodes))+")", args...); err != nil {
			return nil, err
		}
	}
	if len(want) > 0 {
		if err := read("1"); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TSNS != out[j].TSNS {
			return out[i].TSNS < out[j].TSNS
		}
		return out[i].LineID < out[j].LineID
	})
	return out, nil
}

// spanWhere is "(ts in span1 OR ts in span2 ...)".
func spanWhere(spans []span) (string, []any) {
	var parts []string
	var args []any
	for _, sp := range spans {
		if sp.From.IsZero() && sp.To.IsZero() {
			continue
		}
		if len(sp.Nodes) == 0 {
			parts = append(parts, "(ts >= ? AND ts <= ?)")
			args = append(args, utc(sp.From), utc(sp.To).Add(time.Second))
			continue
		}
		parts = append(parts, "(node IN ("+placeholders(len(sp.Nodes))+") AND ts >= ? AND ts <= ?)")
		for _, n := range sp.Nodes {
			args = append(args, n)
		}
		args = append(args, utc(sp.From), utc(sp.To).Add(time.Second))
	}
	if len(parts) == 0 {
		return "", nil
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

// bootLineSpan: a boot's startup lines (server args, pool sizes) are
// logged within minutes of its first line.
const bootLineSpan = 15 * time.Minute

// bootSpans are the startup spans of the boots that cite any of ids.
func (s chStore) bootSpans(ctx context.Context, ids map[uint64]bool) ([]span, error) {
	list := make([]uint64, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	var rows []struct {
		TS time.Time `ch:"boot_ts"`
	}
	if err := s.c.Select(ctx, &rows, "SELECT boot_ts FROM node_boots WHERE hasAny(line_ids, ?) LIMIT 100", list); err != nil {
		return nil, fmt.Errorf("boot lines: %w", err)
	}
	out := make([]span, len(rows))
	for i, r := range rows {
		out[i] = span{From: r.TS.Add(-time.Minute), To: r.TS.Add(bootLineSpan)}
	}
	return out, nil
}

// placeholders is "?, ?, ..." (n of them).
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func uniqStrings(v []string) []string {
	seen := map[string]bool{}
	out := v[:0:0]
	for _, x := range v {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// limitsAt is, per node, the boot in force at t: its latest boot at or
// before t (the most complete version of it: node_boots folds on facts).
func (s chStore) limitsAt(ctx context.Context, nodes []string, t time.Time) ([]NodeLimits, error) {
	nodes = uniqStrings(nonEmpty(nodes))
	if len(nodes) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(nodes)+1)
	for _, n := range nodes {
		args = append(args, n)
	}
	args = append(args, utc(t).Add(time.Second))
	var out []NodeLimits
	err := s.c.Select(ctx, &out, `SELECT node, role, boot_ts, boot_id, sglang_version, context_len, max_total_num_tokens,
 max_req_input_len, max_prefill_tokens, max_running_requests, kv_pool_tokens, page_size, dp_size, allow_auto_truncate
FROM node_boots WHERE node IN (`+placeholders(len(nodes))+`) AND boot_ts <= ?
ORDER BY node, boot_ts DESC, facts DESC LIMIT 1 BY node`, args...)
	if err != nil {
		return nil, fmt.Errorf("node limits: %w", err)
	}
	return out, nil
}

func nonEmpty(v []string) []string {
	out := v[:0:0]
	for _, x := range v {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// contextGatewaySlack: a gateway logs its response after the decode rank
// finished the request, minutes later for a long generation.
const contextGatewaySlack = 10 * time.Minute

// decodeContext lists the engine events on node/rank within ±window of t
// (a primary-key range), then the tenant and gateway request id of each
// of their rooms. gateway_responses is sorted by tenant first, so its read
// is bounded by time and narrowed to those rooms before any grouping.
func (s chStore) decodeContext(ctx context.Context, node string, rank int16, t time.Time, window time.Duration) ([]ContextRow, error) {
	from, to := utc(t).Add(-window-time.Minute), utc(t).Add(window)
	var out []ContextRow
	err := s.c.Select(ctx, &out, `SELECT ts, ts_ns, event, rid, bootstrap_room AS ctx_room, prompt_tokens, finish_type, '' AS gw_tenant,
 '' AS gw_request_id, line_id
FROM engine_events
WHERE node = ? AND dp_rank = ? AND ts >= ? AND ts <= ? AND bootstrap_room != 0
ORDER BY ts_ns LIMIT 1 BY line_id LIMIT 2000`, node, rank, from, to)
	if err != nil {
		return nil, fmt.Errorf("decode context: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	rooms := map[uint64]bool{}
	args := []any{}
	for _, r := range out {
		if !rooms[r.Room] {
			rooms[r.Room] = true
			args = append(args, r.Room)
		}
	}
	var gw []struct {
		Room   uint64 `ch:"bootstrap_room"`
		Tenant string `ch:"tenant"`
		ID     string `ch:"request_id"`
	}
	err = s.c.Select(ctx, &gw, `SELECT bootstrap_room, any(tenant) AS tenant, any(request_id) AS request_id
FROM gateway_responses
PREWHERE bootstrap_room IN (`+placeholders(len(args))+`)
WHERE ts >= ? AND ts <= ?
GROUP BY bootstrap_room`, append(args, from, to.Add(contextGatewaySlack))...)
	if err != nil {
		return nil, fmt.Errorf("decode context requests: %w", err)
	}
	by := map[uint64]int{}
	for i, g := range gw {
		by[g.Room] = i
	}
	for i := range out {
		if j, ok := by[out[i].Room]; ok {
			out[i].Tenant, out[i].RequestID = gw[j].Tenant, gw[j].ID
		}
	}
	return out, nil
}
