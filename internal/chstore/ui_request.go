package chstore

import (
	"github.com/kvtrail/kvtrail/domain"

	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// decodePool reads the rank's batch lines by (node, ts range): a key read.
func (s UIStore) decodePool(ctx context.Context, node string, rank int16, t time.Time) ([]domain.PoolPoint, error) {
	var out []domain.PoolPoint
	err := s.Store.Select(ctx, &out, `SELECT ts, ts_ns, token_usage, num_token, running_req, line_id FROM batch_stats
WHERE node = ? AND ts >= ? AND ts <= ? AND (dp_rank = ? OR dp_rank < 0)
ORDER BY ts_ns LIMIT 1 BY line_id, msg_index LIMIT 2000`, node, uiUTC(t).Add(-domain.DecodePoolWindow), uiUTC(t).Add(domain.DecodePoolWindow), rank)
	if err != nil {
		return nil, fmt.Errorf("decode pool: %w", err)
	}
	return out, nil
}

type uiEngineEventRow struct {
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

type uiTransferEventRow struct {
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

// uiRequestSlack bounds the engine-side search around a gateway response: the
// engines logged the request before the gateway answered, and clocks skew.
const uiRequestSlack = time.Hour

// uiRawCols are an evidence line's columns. source_ref names the source
// of a line written since migration 0013 (its source and file_digest are
// empty): uiResolveSources fills them in.
const uiRawCols = `ts, ts_ns, node, role, log_format, source, file_digest, source_ref, byte_offset, line_no, line_id, kind, parse_status, line`

// uiRawLine is a row of uiRawCols.
type uiRawLine struct {
	domain.EvidenceLine
	SourceRef uint64 `ch:"source_ref"`
}

// uiIdRef is where an id was seen: an id_index row.
type uiIdRef struct {
	ID     string    `ch:"id"`
	Kind   string    `ch:"id_kind"`
	Node   string    `ch:"node"`
	TS     time.Time `ch:"ts"`
	LineID uint64    `ch:"line_id"`
}

// idRefs reads id_index for ids of the given kinds: a primary-key read
// (the table is sorted by id, id_kind), whatever the size of the data.
func (s UIStore) idRefs(ctx context.Context, kinds []string, ids []string) ([]uiIdRef, error) {
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
	var out []uiIdRef
	err := s.Store.Select(ctx, &out, `SELECT id, id_kind, node, ts, line_id FROM id_index
WHERE id IN (`+uiPlaceholders(len(ids))+`) AND has(?, id_kind) LIMIT 10000`, args...)
	if err != nil {
		return nil, fmt.Errorf("id index: %w", err)
	}
	return out, nil
}

// Request finds one gateway request by its request id: id_index gives the
// gateway line's time, which bounds the read of gateway_responses to the
// partition and granules around it. Several rows (the same id from two
// gateways) are resolved to the newest.
func (s UIStore) Request(ctx context.Context, requestID, tenant string) (domain.RequestRow, error) {
	refs, err := s.idRefs(ctx, []string{"request_id"}, []string{requestID})
	if err != nil {
		return domain.RequestRow{}, err
	}
	if len(refs) == 0 {
		return domain.RequestRow{}, uiNotFound
	}
	from, to := refs[0].TS, refs[0].TS
	for _, r := range refs {
		from, to = uiMinTime(from, r.TS), uiMaxTime(to, r.TS)
	}
	var rows []domain.RequestRow
	// With the tenant this reads by the table's key (tenant, ts, ...);
	// without it, the granules of the partition that may hold the time.
	if tenant != "" {
		err = s.Store.Select(ctx, &rows, "SELECT "+uiRequestCols+` FROM gateway_responses
WHERE tenant = ? AND ts >= ? AND ts <= ? AND request_id = ? ORDER BY ts_ns DESC LIMIT 1`, tenant, uiUTC(from), uiUTC(to).Add(time.Second), requestID)
		if err != nil {
			return domain.RequestRow{}, fmt.Errorf("request: %w", err)
		}
	}
	if len(rows) == 0 {
		err = s.Store.Select(ctx, &rows, "SELECT "+uiRequestCols+` FROM gateway_responses
PREWHERE request_id = ? WHERE ts >= ? AND ts <= ? ORDER BY ts_ns DESC LIMIT 1`, requestID, uiUTC(from), uiUTC(to).Add(time.Second))
		if err != nil {
			return domain.RequestRow{}, fmt.Errorf("request: %w", err)
		}
	}
	if len(rows) == 0 {
		return domain.RequestRow{}, uiNotFound
	}
	return rows[0], nil
}

// The keyed reads below do not use FINAL: on 18.16 FINAL merges every part
// of the partitions it touches, which costs more than the read itself. Rows
// a Replacing engine has not folded yet are identical copies (same line id
// and message) or older versions, so "LIMIT 1 BY line_id, msg_index",
// "ORDER BY version DESC" or a map by line id does the folding.

// uiFactRow is the part of a request_facts row the request page reads: the
// correlation ingest and analyze already made, so the page does not redo it.
type uiFactRow struct {
	PrefillNode string   `ch:"prefill_node"`
	PrefillRID  string   `ch:"prefill_rid"`
	DecodeNode  string   `ch:"decode_node"`
	DecodeRID   string   `ch:"decode_rid"`
	DecodeRank  int16    `ch:"decode_dp_rank"`
	LineIDs     []uint64 `ch:"line_ids"`
}

// fact reads the request's request_facts row (the newest version), bounded
// to the partition of the gateway's time. Its key is the request id, or
// the id and the gateway line when another request reused the id.
func (s UIStore) fact(ctx context.Context, req domain.RequestRow) (*uiFactRow, error) {
	var out []uiFactRow
	t := uiUTC(req.TS)
	err := s.Store.Select(ctx, &out, `SELECT prefill_node, prefill_rid, decode_node, decode_rid, decode_dp_rank, line_ids
FROM request_facts WHERE tenant = ? AND request_key IN (?, ?) AND ts >= ? AND ts <= ? ORDER BY version DESC LIMIT 1`,
		req.Tenant, req.RequestID, domain.ReusedKey(req.RequestID, req.LineID), t, t.Add(time.Second))
	if err != nil {
		return nil, fmt.Errorf("request facts: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

// uiLineSlack widens a request's known line times: lines without an id of
// their own (a rejection message) sit close to the ones with one.
const uiLineSlack = 2 * time.Minute

// RequestTimeline assembles the swimlanes of one request from keys only:
// id_index for the gateway line and the request's room and rids,
// request_facts for every line ingest or analysis linked to it (including
// lines that carry no id, like a prefill rejection), then the event tables
// and raw_lines by (time range, line id).
func (s UIStore) RequestTimeline(ctx context.Context, requestID, tenant string, contextWindow time.Duration) (*domain.Timeline, error) {
	req, err := s.Request(ctx, requestID, tenant)
	if err != nil {
		return nil, err
	}
	tl := &domain.Timeline{Request: req, ContextSeconds: int(contextWindow.Seconds()), DecodeRank: -1}
	tl.Events = append(tl.Events, domain.TimelineEvent{Lane: "gateway", TS: req.TS, TSNS: req.TSNS, Node: req.Gateway, DPRank: -1,
		Event: fmt.Sprintf("response %d", req.Status), Detail: fmt.Sprintf("prompt %d, completion %d, cached %d, ttft %.0f ms, %.0f ms",
			req.PromptTokens, req.CompletionTokens, req.CachedTokens, req.TTFTMs, req.DurationMs), LineID: domain.U64(req.LineID)})
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
	var limits []domain.NodeLimits
	var decodeAt uiDecodeRef
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
		// The other side of the request needs its findings' ids, not the
		// other reads: it is read here, alongside them.
		if tl.Findings, errs[2] = s.findingsFor(ctx, req); errs[2] != nil {
			return
		}
		fids := make([]string, len(tl.Findings))
		for i, f := range tl.Findings {
			fids[i] = f.FindingID
		}
		tl.Sources, tl.OwnDataOnly, errs[2] = s.sourcesFor(ctx, req.RequestID, req.Tenant, fids)
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
	uiFillForeign(tl.Findings, tl.Sources)
	sort.SliceStable(tl.Events, func(i, j int) bool { return tl.Events[i].TSNS < tl.Events[j].TSNS })
	for i := range tl.Context {
		tl.Context[i].Same = tl.Context[i].Room == req.Room
	}
	return tl, nil
}

// uiDecodeRef is the decode instance and rank a request ran on.
type uiDecodeRef struct {
	Node string
	Rank int16
}

// requestLines reads the request's lines: those the fact linked (ids) and
// those carrying its room or rids (keys) near its time, then the engine
// and transfer events among them.
func (s UIStore) requestLines(ctx context.Context, tl *domain.Timeline, ids map[uint64]bool, keys, nodes []string) (map[string]time.Time, uiDecodeRef, error) {
	req := tl.Request
	// The room and rids add lines the correlator may not have linked (a
	// transfer retry); only those near the request count, as rids and
	// rooms are reused over weeks.
	refs, err := s.idRefs(ctx, []string{"room", "rid"}, uiUniqStrings(keys))
	if err != nil {
		return nil, uiDecodeRef{}, err
	}
	// The lines are read around the request's time and around each ref's
	// (one span per minute they fall in), on the request's nodes: refs an
	// hour apart do not make the read cover the hour between them.
	allNodes := append([]string{req.Gateway}, nodes...)
	at := []time.Time{uiUTC(req.TS)}
	near := func(r uiIdRef) bool {
		return !r.TS.Before(req.TS.Add(-uiRequestSlack)) && !r.TS.After(req.TS.Add(uiRequestSlack))
	}
	// A room shared by many requests names their lines too: past one
	// request's worth, the request's own are those of its rids and those
	// its fact lists.
	roomRefs := 0
	for _, r := range refs {
		if r.Kind == "room" && near(r) {
			roomRefs++
		}
	}
	shared := roomRefs > domain.RoomLines
	for _, r := range refs {
		if !near(r) || (shared && r.Kind == "room") {
			continue
		}
		ids[r.LineID] = true
		at = append(at, uiUTC(r.TS))
		allNodes = append(allNodes, r.Node)
	}
	allNodes = uiUniqStrings(uiNonEmpty(allNodes))
	var spans []domain.LineSpan
	seenMinute := map[int64]bool{}
	for _, t := range at {
		if m := t.Unix() / 60; !seenMinute[m] {
			seenMinute[m] = true
			spans = append(spans, domain.LineSpan{From: t.Add(-uiLineSlack), To: t.Add(uiLineSlack), Nodes: allNodes})
		}
	}
	lineIDs := make([]uint64, 0, len(ids))
	for id := range ids {
		lineIDs = append(lineIDs, id)
	}
	sort.Slice(lineIDs, func(i, j int) bool { return lineIDs[i] < lineIDs[j] })
	if tl.Lines, err = s.Lines(ctx, lineIDs, spans...); err != nil {
		return nil, uiDecodeRef{}, err
	}
	// The event tables are read at the seconds and on the nodes the lines
	// were found at: an event has its line's node and time.
	var evSpans []domain.LineSpan
	seenAt := map[string]bool{}
	for _, l := range tl.Lines {
		k := l.Node + "|" + strconv.FormatInt(l.TS.Unix(), 10)
		if !seenAt[k] {
			seenAt[k] = true
			evSpans = append(evSpans, domain.LineSpan{From: l.TS, To: l.TS, Nodes: []string{l.Node}})
		}
	}
	return s.requestEvents(ctx, tl, lineIDs, evSpans)
}

// requestEvents adds the engine and transfer events among lineIDs to the
// timeline and returns the engine nodes seen, with a time on each.
func (s UIStore) requestEvents(ctx context.Context, tl *domain.Timeline, lineIDs []uint64, spans []domain.LineSpan) (map[string]time.Time, uiDecodeRef, error) {
	nodes := map[string]time.Time{}
	var decodeAt uiDecodeRef
	where, args := uiSpanWhere(spans)
	if where == "" {
		return nodes, decodeAt, nil
	}
	// The engine and the transfer events are read in parallel.
	var ev []uiEngineEventRow
	var tr []uiTransferEventRow
	var evErr, trErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		trErr = s.Store.Select(ctx, &tr, `SELECT ts, ts_ns, node, role, dp_rank, source, event, rid, other_room, reason, peer, line_id
FROM transfer_events PREWHERE has(?, line_id) WHERE `+where+` ORDER BY ts_ns LIMIT 1 BY line_id, msg_index`, append([]any{lineIDs}, args...)...)
	}()
	evErr = s.Store.Select(ctx, &ev, `SELECT ts, ts_ns, node, role, dp_rank, event, rid, prompt_tokens, completion_tokens,
 cached_tokens, limit_tokens, finish_type, finish_message, status_code, line_id
FROM engine_events PREWHERE has(?, line_id) WHERE `+where+` ORDER BY ts_ns LIMIT 1 BY line_id, msg_index`, append([]any{lineIDs}, args...)...)
	wg.Wait()
	if evErr != nil {
		return nil, decodeAt, fmt.Errorf("engine events: %w", evErr)
	}
	if trErr != nil {
		return nil, decodeAt, fmt.Errorf("transfer events: %w", trErr)
	}
	for _, e := range ev {
		lane := e.Role
		if lane != "prefill" {
			lane = "decode"
		}
		if e.Role == "decode" && decodeAt.Node == "" {
			decodeAt = uiDecodeRef{e.Node, e.DPRank}
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
		tl.Events = append(tl.Events, domain.TimelineEvent{Lane: lane, TS: e.TS, TSNS: e.TSNS, Node: e.Node, DPRank: e.DPRank,
			Event: e.Event, RID: e.RID, Detail: d, LineID: domain.U64(e.LineID)})
	}
	for _, e := range tr {
		d := e.Reason
		if e.Other != 0 {
			d += fmt.Sprintf(" (other room %d)", e.Other)
		}
		if e.Peer != "" {
			d += " peer " + e.Peer
		}
		tl.Events = append(tl.Events, domain.TimelineEvent{Lane: "transfer", TS: e.TS, TSNS: e.TSNS, Node: e.Node, DPRank: e.DPRank,
			Event: e.Source + " " + e.Event, RID: e.RID, Detail: d, LineID: domain.U64(e.LineID)})
	}
	return nodes, decodeAt, nil
}

// Lines reads evidence lines by id, oldest first. raw_lines is sorted by
// (node, ts, line_id), so a line is found by key only with its time: the
// caller gives the spans its lines are expected in. Lines not found there
// are looked up near the boots that cite them (node_boots.line_ids: boot
// lines are evidence of the limits) and, last, by a scan of line ids,
// which is slow at scale and logged by the caller's timing.
func (s UIStore) Lines(ctx context.Context, ids []uint64, near ...domain.LineSpan) ([]domain.EvidenceLine, error) {
	return s.linesOn(ctx, ids, nil, near...)
}

// linesOn is Lines with the nodes the lines are known to be on: before
// the last resort, the lines still missing are looked for on those nodes
// only (node leads raw_lines' key, so that reads their part of the table).
func (s UIStore) linesOn(ctx context.Context, ids []uint64, nodes []string, near ...domain.LineSpan) ([]domain.EvidenceLine, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []domain.EvidenceLine
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	read := func(where string, args ...any) error {
		missing := make([]uint64, 0, len(want))
		for id := range want {
			missing = append(missing, id)
		}
		var got []uiRawLine
		// PREWHERE on line_id: of the granules the time range selects (at
		// least one per node), only those holding a wanted line have their
		// text and other columns read.
		if err := s.Store.Select(ctx, &got, "SELECT "+uiRawCols+" FROM raw_lines PREWHERE has(?, line_id) WHERE "+where,
			append([]any{missing}, args...)...); err != nil {
			return fmt.Errorf("raw lines: %w", err)
		}
		lines, err := uiResolveSources(ctx, s.Store, got)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if want[l.LineID] {
				delete(want, l.LineID)
				out = append(out, l)
			}
		}
		return nil
	}
	if w, args := uiSpanWhere(near); w != "" {
		if err := read(w, args...); err != nil {
			return nil, err
		}
	}
	if len(want) > 0 {
		boots, err := s.bootSpans(ctx, want)
		if err != nil {
			return nil, err
		}
		if w, args := uiSpanWhere(boots); w != "" {
			if err := read(w, args...); err != nil {
				return nil, err
			}
		}
	}
	if nodes = uiUniqStrings(uiNonEmpty(nodes)); len(want) > 0 && len(nodes) > 0 {
		args := make([]any, len(nodes))
		for i, n := range nodes {
			args[i] = n
		}
		if err := read("node IN ("+uiPlaceholders(len(nodes))+")", args...); err != nil {
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

// uiSpanWhere is "(ts in span1 OR ts in span2 ...)".
func uiSpanWhere(spans []domain.LineSpan) (string, []any) {
	var parts []string
	var args []any
	for _, sp := range spans {
		if sp.From.IsZero() && sp.To.IsZero() {
			continue
		}
		if len(sp.Nodes) == 0 {
			parts = append(parts, "(ts >= ? AND ts <= ?)")
			args = append(args, uiUTC(sp.From), uiUTC(sp.To).Add(time.Second))
			continue
		}
		parts = append(parts, "(node IN ("+uiPlaceholders(len(sp.Nodes))+") AND ts >= ? AND ts <= ?)")
		for _, n := range sp.Nodes {
			args = append(args, n)
		}
		args = append(args, uiUTC(sp.From), uiUTC(sp.To).Add(time.Second))
	}
	if len(parts) == 0 {
		return "", nil
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

// uiBootLineSpan: a boot's startup lines (server args, pool sizes) are
// logged within minutes of its first line.
const uiBootLineSpan = 15 * time.Minute

// bootSpans are the startup spans of the boots that cite any of ids.
func (s UIStore) bootSpans(ctx context.Context, ids map[uint64]bool) ([]domain.LineSpan, error) {
	list := make([]uint64, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	var rows []struct {
		TS time.Time `ch:"boot_ts"`
	}
	if err := s.Store.Select(ctx, &rows, "SELECT boot_ts FROM node_boots WHERE hasAny(line_ids, ?) LIMIT 100", list); err != nil {
		return nil, fmt.Errorf("boot lines: %w", err)
	}
	out := make([]domain.LineSpan, len(rows))
	for i, r := range rows {
		out[i] = domain.LineSpan{From: r.TS.Add(-time.Minute), To: r.TS.Add(uiBootLineSpan)}
	}
	return out, nil
}

func uiMinTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func uiMaxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func uiUniqStrings(v []string) []string {
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
func (s UIStore) limitsAt(ctx context.Context, nodes []string, t time.Time) ([]domain.NodeLimits, error) {
	nodes = uiUniqStrings(uiNonEmpty(nodes))
	if len(nodes) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(nodes)+1)
	for _, n := range nodes {
		args = append(args, n)
	}
	args = append(args, uiUTC(t).Add(time.Second))
	var out []domain.NodeLimits
	err := s.Store.Select(ctx, &out, `SELECT node, role, boot_ts, boot_id, sglang_version, context_len, max_total_num_tokens,
 max_req_input_len, max_prefill_tokens, max_running_requests, kv_pool_tokens, page_size, dp_size, allow_auto_truncate
FROM node_boots WHERE node IN (`+uiPlaceholders(len(nodes))+`) AND boot_ts <= ?
ORDER BY node, boot_ts DESC, facts DESC LIMIT 1 BY node`, args...)
	if err != nil {
		return nil, fmt.Errorf("node limits: %w", err)
	}
	return out, nil
}

func uiNonEmpty(v []string) []string {
	out := v[:0:0]
	for _, x := range v {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// uiContextGatewaySlack: a gateway logs its response after the decode rank
// finished the request, minutes later for a long generation.
const uiContextGatewaySlack = 10 * time.Minute

// decodeContext lists the engine events on node/rank within ±window of t
// (a primary-key range), then the tenant and gateway request id of each
// of their rooms. gateway_responses is sorted by tenant first, so its read
// is bounded by time and narrowed to those rooms before any grouping.
func (s UIStore) decodeContext(ctx context.Context, node string, rank int16, t time.Time, window time.Duration) ([]domain.ContextRow, error) {
	from, to := uiUTC(t).Add(-window-time.Minute), uiUTC(t).Add(window)
	var out []domain.ContextRow
	err := s.Store.Select(ctx, &out, `SELECT ts, ts_ns, event, rid, bootstrap_room AS ctx_room, prompt_tokens, finish_type, '' AS gw_tenant,
 '' AS gw_request_id, line_id
FROM engine_events
WHERE node = ? AND dp_rank = ? AND ts >= ? AND ts <= ? AND bootstrap_room != 0
ORDER BY ts_ns LIMIT 1 BY line_id, msg_index LIMIT 2000`, node, rank, from, to)
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
	err = s.Store.Select(ctx, &gw, `SELECT bootstrap_room, any(tenant) AS tenant, any(request_id) AS request_id
FROM gateway_responses
PREWHERE bootstrap_room IN (`+uiPlaceholders(len(args))+`)
WHERE ts >= ? AND ts <= ?
GROUP BY bootstrap_room`, append(args, from, to.Add(uiContextGatewaySlack))...)
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
