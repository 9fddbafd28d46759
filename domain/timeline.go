package domain

import "time"

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

// EvidenceLine is an evidence line exactly as ingested.
type EvidenceLine struct {
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
	Lines          []EvidenceLine  `json:"evidence_lines"`
	Limits         []NodeLimits    `json:"limits"`
	Findings       []FindingView   `json:"findings"`
	DecodeNode     string          `json:"decode_node"`
	DecodeRank     int16           `json:"decode_dp_rank"`
	ContextSeconds int             `json:"context_seconds"`
	Context        []ContextRow    `json:"context"`
	// Sources are the tenants on the other side of this request, from the
	// affected reconstruction; OwnDataOnly marks a request served from
	// stale pages that held only its own tenant's data.
	Sources     []SourceTenant `json:"sources"`
	OwnDataOnly bool           `json:"own_data_only"`
	// Pool is the decode rank's KV pool usage from its batch lines around
	// the request (±DecodePoolWindow).
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

// LineSpan is a time range of lines to read (a ts range on tables sorted by
// (node, ts, ...): node is low-cardinality, so ClickHouse reads only the
// granules in the range, per node), on the given nodes if any are known.
type LineSpan struct {
	From, To time.Time
	Nodes    []string
}

// DecodePoolWindow is how far around a request its decode rank's KV pool
// usage is read and drawn.
const DecodePoolWindow = 5 * time.Minute
