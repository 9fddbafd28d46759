package analyze

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Boot is one engine start and the limits in force until the node's next
// boot (node_boots, latest version of each row).
type Boot struct {
	Node, Role         string
	At                 time.Time
	AtNs               uint64
	ID                 string
	Version            string
	Mode               string
	PageSize           uint64
	ContextLen         uint64
	MaxTotalTokens     uint64
	MaxReqInputLen     uint64
	KVPool             uint64
	DPSize             uint64
	AutoTruncate       bool
	Args               map[string]string
	Lines              []uint64
	Next               *Boot // the node's next boot, nil if last
	HasLimits, HasPage bool
}

// End is when the boot stopped being in force (the next boot), or zero.
func (b *Boot) End() time.Time {
	if b.Next == nil {
		return time.Time{}
	}
	return b.Next.At
}

// Limit is the prompt length at or above which the scheduler rejects a
// request (reference §c1: len >= max_req_input_len).
func (b *Boot) Limit() uint64 { return b.MaxReqInputLen }

// Host is the node's address from server_args (host=...), if logged.
func (b *Boot) Host() string { return strings.Trim(b.Args["host"], "'\"") }

// FollowsRoom reports whether the DP rank is bootstrap_room % dp_size
// (load_balance_method='follow_bootstrap_room', reference §e).
func (b *Boot) FollowsRoom() bool {
	if b.DPSize <= 1 {
		return true
	}
	m := strings.Trim(b.Args["load_balance_method"], "'\"")
	return m == "" || m == "follow_bootstrap_room"
}

// Boots indexes boots by node.
type Boots struct {
	ByNode map[string][]*Boot
}

// At returns the boot in force on node at t (the latest boot at or before
// t), or nil when none is known.
func (bs *Boots) At(node string, t time.Time) *Boot {
	list := bs.ByNode[node]
	i := sort.Search(len(list), func(i int) bool { return list[i].At.After(t) })
	if i == 0 {
		return nil
	}
	return list[i-1]
}

// Nodes returns the node names in order.
func (bs *Boots) Nodes() []string {
	out := make([]string, 0, len(bs.ByNode))
	for n := range bs.ByNode {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

const bootsSQL = `SELECT node, role, boot_ts, boot_ts_ns, boot_id, sglang_version, disaggregation_mode, page_size,
 context_len, max_total_num_tokens, max_req_input_len, kv_pool_tokens, dp_size, allow_auto_truncate,
 arg_keys, arg_values, line_ids
FROM node_boots FINAL
ORDER BY node, boot_ts_ns`

func loadBoots(ctx context.Context, db DB) (*Boots, error) {
	rows, err := db.Query(ctx, bootsSQL)
	if err != nil {
		return nil, fmt.Errorf("load node boots: %w", err)
	}
	defer rows.Close()
	bs := &Boots{ByNode: map[string][]*Boot{}}
	for rows.Next() {
		var (
			b          Boot
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
		bs.ByNode[b.Node] = append(bs.ByNode[b.Node], &b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read node boots: %w", err)
	}
	for _, list := range bs.ByNode {
		for i := 0; i+1 < len(list); i++ {
			list[i].Next = list[i+1]
		}
	}
	return bs, nil
}

// EngineEvent is one engine_events row.
type EngineEvent struct {
	TS         time.Time
	Node, Role string
	DPRank     int16
	Event      string
	RID        string
	Room       uint64
	BootHost   string
	Prompt     uint64
	Completion uint64
	Cached     uint64
	InputLen   uint64
	LimitTok   uint64
	FinishType string
	FinishMsg  string
	Status     uint16
	Line       uint64
}

// Aborted reports a Finish whose finish_reason was an abort.
func (e *EngineEvent) Aborted() bool { return e.FinishType == "abort" }

// engineEventsSQL: every per-request line in the time range. http_access
// lines carry no request id and are not needed.
const engineEventsSQL = `SELECT ts_ns, node, role, dp_rank, event, rid, bootstrap_room, bootstrap_host, prompt_tokens,
 completion_tokens, cached_tokens, input_len, limit_tokens, finish_type, finish_message, status_code, line_id
FROM engine_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND event != 'http_access'
ORDER BY ts_ns, line_id`

func loadEngine(ctx context.Context, db DB, from, to time.Time) ([]*EngineEvent, error) {
	rows, err := db.Query(ctx, engineEventsSQL, uint32(from.Unix()), uint32(to.Unix()))
	if err != nil {
		return nil, fmt.Errorf("load engine events: %w", err)
	}
	defer rows.Close()
	var out []*EngineEvent
	seen := map[uint64]bool{}
	for rows.Next() {
		var e EngineEvent
		var ns uint64
		if err := rows.Scan(&ns, &e.Node, &e.Role, &e.DPRank, &e.Event, &e.RID, &e.Room, &e.BootHost, &e.Prompt,
			&e.Completion, &e.Cached, &e.InputLen, &e.LimitTok, &e.FinishType, &e.FinishMsg, &e.Status, &e.Line); err != nil {
			return nil, fmt.Errorf("scan engine event: %w", err)
		}
		// ReplacingMergeTree may hold a re-ingested line twice until merged.
		if seen[e.Line] {
			continue
		}
		seen[e.Line] = true
		e.TS = time.Unix(0, int64(ns)).UTC()
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read engine events: %w", err)
	}
	return out, nil
}

// TransferEvent is one transfer_events row.
type TransferEvent struct {
	TS         time.Time
	Node, Role string
	DPRank     int16
	Source     string
	Event      string
	RID        string
	Room       uint64
	OtherRoom  uint64
	MetaIndex  int64
	Reason     string
	Peer, NIC  string
	Line       uint64
}

// Failure reports an event that failed a request's transfer or bootstrap.
func (t *TransferEvent) Failure() bool {
	switch t.Event {
	case "prefill_transfer_failed", "decode_transfer_failed", "prefill_bootstrap_failed", "decode_handshake_failed",
		"bootstrap_failed", "handshake_failed", "transfer_failed", "prefill_down", "lost_connection":
		return true
	}
	return strings.HasSuffix(t.Event, "_failed") && t.Room != 0
}

// ClientAbort reports a failure caused by an AbortReq (client or router
// abort), as opposed to a timeout or a dead peer.
func (t *TransferEvent) ClientAbort() bool { return strings.Contains(t.Reason, "Aborted by AbortReq") }

const transferEventsSQL = `SELECT ts_ns, node, role, dp_rank, source, event, rid, bootstrap_room, other_room, metadata_index,
 reason, peer, nic, line_id
FROM transfer_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)
ORDER BY ts_ns, line_id`

func loadTransfer(ctx context.Context, db DB, from, to time.Time) ([]*TransferEvent, error) {
	rows, err := db.Query(ctx, transferEventsSQL, uint32(from.Unix()), uint32(to.Unix()))
	if err != nil {
		return nil, fmt.Errorf("load transfer events: %w", err)
	}
	defer rows.Close()
	var out []*TransferEvent
	seen := map[uint64]bool{}
	for rows.Next() {
		var t TransferEvent
		var ns uint64
		if err := rows.Scan(&ns, &t.Node, &t.Role, &t.DPRank, &t.Source, &t.Event, &t.RID, &t.Room, &t.OtherRoom,
			&t.MetaIndex, &t.Reason, &t.Peer, &t.NIC, &t.Line); err != nil {
			return nil, fmt.Errorf("scan transfer event: %w", err)
		}
		if seen[t.Line] {
			continue
		}
		seen[t.Line] = true
		t.TS = time.Unix(0, int64(ns)).UTC()
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read transfer events: %w", err)
	}
	return out, nil
}

// GatewayResponse is one gateway_responses row.
type GatewayResponse struct {
	TS                          time.Time
	RequestID, Tenant, Model    string
	Status                      uint16
	Prompt, Completion, Cached  uint64
	TTFTms, DurationMS          float64
	PrefillEP, DecodeEP         string
	Room                        uint64
	PrefillRID, DecodeRID, GWay string
	Line                        uint64
}

const gatewaySQL = `SELECT ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens, cached_tokens,
 ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, gateway, line_id
FROM gateway_responses
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)
ORDER BY ts_ns, request_id`

func loadGateway(ctx context.Context, db DB, w Window) ([]*GatewayResponse, error) {
	rows, err := db.Query(ctx, gatewaySQL, uint32(w.From.Unix()), uint32(w.To.Unix()))
	if err != nil {
		return nil, fmt.Errorf("load gateway responses: %w", err)
	}
	defer rows.Close()
	var out []*GatewayResponse
	seen := map[string]bool{}
	for rows.Next() {
		var g GatewayResponse
		var ns uint64
		if err := rows.Scan(&ns, &g.RequestID, &g.Tenant, &g.Model, &g.Status, &g.Prompt, &g.Completion, &g.Cached,
			&g.TTFTms, &g.DurationMS, &g.PrefillEP, &g.DecodeEP, &g.Room, &g.PrefillRID, &g.DecodeRID, &g.GWay, &g.Line); err != nil {
			return nil, fmt.Errorf("scan gateway response: %w", err)
		}
		g.TS = time.Unix(0, int64(ns)).UTC()
		if !w.Contains(g.TS) {
			continue
		}
		k := g.RequestID + "\x00" + itoa(g.Line)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, &g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read gateway responses: %w", err)
	}
	return out, nil
}

// dataSpanSQL finds the time range covered by the request-level tables.
const dataSpanSQL = `SELECT min(ts_ns), max(ts_ns), max(ingested_at) FROM gateway_responses`
const engineSpanSQL = `SELECT min(ts_ns), max(ts_ns), max(ingested_at) FROM engine_events`

// DataSpan returns the earliest and latest request time in the database
// and the ingest watermark (latest ingested_at), used when a window is not
// given.
func DataSpan(ctx context.Context, db DB) (from, to, watermark time.Time, err error) {
	var lo, hi uint64
	for _, q := range []string{dataSpanSQL, engineSpanSQL} {
		rows, err := db.Query(ctx, q)
		if err != nil {
			return from, to, watermark, fmt.Errorf("data span: %w", err)
		}
		for rows.Next() {
			var a, b uint64
			var wm time.Time
			if err := rows.Scan(&a, &b, &wm); err != nil {
				rows.Close()
				return from, to, watermark, fmt.Errorf("scan data span: %w", err)
			}
			if a > 0 && (lo == 0 || a < lo) {
				lo = a
			}
			if b > hi {
				hi = b
			}
			if wm.After(watermark) {
				watermark = wm.UTC()
			}
		}
		rows.Close()
	}
	if lo == 0 {
		return from, to, watermark, nil
	}
	from = time.Unix(0, int64(lo)).UTC().Truncate(time.Second)
	to = time.Unix(0, int64(hi)).UTC().Truncate(time.Second).Add(time.Second)
	return from, to, watermark, nil
}

// endpointHost extracts the host of "http://10.0.0.11:30000" or
// "10.0.0.11:8998".
func endpointHost(ep string) string {
	if ep == "" {
		return ""
	}
	if strings.Contains(ep, "://") {
		if u, err := url.Parse(ep); err == nil {
			return u.Hostname()
		}
	}
	if i := strings.LastIndexByte(ep, ':'); i > 0 && !strings.Contains(ep[:i], ":") {
		return ep[:i]
	}
	return ep
}

// loadNodeEndpoints reads the endpoint -> node mapping ingest recorded from
// the sources manifests (table nodes, latest version per node).
func loadNodeEndpoints(ctx context.Context, db DB) (map[string]string, error) {
	rows, err := db.Query(ctx, "SELECT node, argMax(endpoints, version) AS eps FROM nodes GROUP BY node ORDER BY node")
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
