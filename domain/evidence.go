package domain

import (
	"strings"
	"time"
)

// The evidence: what ingest stored of each log line the analysis reads.
// Each type is one row of its table (engine_events, transfer_events,
// gateway_responses, batch_stats, page_events, probes) with the line's
// time and its raw_lines.line_id (Line), so a conclusion can cite it.

// Engine event names (engine_events.event) the analysis relies on. The
// parser writes more (see docs/formats.md); these are the ones with a
// meaning for linking and judging a request.
const (
	EventReceived         = "received"          // the scheduler took the request (Receive line)
	EventReceivedOpenAI   = "received_openai"   // the OpenAI-compatible handler logged it
	EventFinished         = "finished"          // Finish line with finish_reason
	EventRejected         = "rejected"          // input too long (§c1)
	EventCapacityExceeded = "capacity_exceeded" // KV pool too small for the request (§c3)
	EventExpandExceeded   = "expand_exceeded"   // no room to grow the request (§c3)
	EventHTTPAccess       = "http_access"       // uvicorn access line, no request id
)

// Transfer event names (transfer_events.event) the analysis relies on
// beyond Failure.
const (
	// EventDeferredReleaseTimeout: a deferred decode KV release gave an
	// aborted request's pages back without the prefill's drain ack
	// (sglang #35049; docs/sglang-log-formats.md §c4).
	EventDeferredReleaseTimeout = "deferred_release_timeout"
)

// Page event names (page_events.event).
const (
	PageAlloc = "alloc"
	PageFree  = "free"
	PageWrite = "write"
	PageRead  = "read"
)

// FinishAbort is the finish_type of an aborted request.
const FinishAbort = "abort"

// EngineEvent is one engine_events row: a per-request line of a prefill or
// decode engine, with the columns the analysis reads. An analysis holds
// a slice's lines at a time (at 2M requests, 400,000 of them read per
// slice, 23M in all), so a column no analyzer reads is not read into it
// (bootstrap_host, which the node map counts in a query of its own;
// input_len; limit_tokens, which the request view reads itself), and the
// small fields sit together.
type EngineEvent struct {
	TS         time.Time
	Node, Role string
	Event      string
	RID        string
	FinishType string
	FinishMsg  string
	Room       uint64
	Prompt     uint64
	Completion uint64
	Cached     uint64
	Line       uint64
	DPRank     int16
	Status     uint16
	// Msg is the message's place in its line (msg_index): 0 for the
	// line's primary message, n for the n-th other message of a line that
	// holds several (SGLang lines glued without a newline). (Line, Msg)
	// names a row.
	Msg uint8
}

// Aborted reports a Finish whose finish_reason was an abort.
func (e *EngineEvent) Aborted() bool { return e.FinishType == FinishAbort }

// TransferEvent is one transfer_events row: a KV transfer, bootstrap or
// metadata problem logged by SGLang or Mooncake.
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
	Msg        uint8 // as EngineEvent.Msg
}

// transferFailures are the transfer events that fail a request's transfer
// or bootstrap.
var transferFailures = map[string]bool{
	"prefill_transfer_failed": true, "decode_transfer_failed": true, "prefill_bootstrap_failed": true,
	"decode_handshake_failed": true, "bootstrap_failed": true, "handshake_failed": true, "transfer_failed": true,
	"prefill_down": true, "lost_connection": true,
}

// Failure reports an event that failed a request's transfer or bootstrap.
func (t *TransferEvent) Failure() bool {
	if transferFailures[t.Event] {
		return true
	}
	return strings.HasSuffix(t.Event, "_failed") && t.Room != 0
}

// ClientAbort reports a failure caused by an AbortReq (client or router
// abort), as opposed to a timeout or a dead peer.
func (t *TransferEvent) ClientAbort() bool { return strings.Contains(t.Reason, "Aborted by AbortReq") }

// GatewayResponse is one gateway_responses row: what a client was told.
// TTFTMs and DurationMs are milliseconds (the one spelling; the columns
// are ttft_ms and duration_ms).
type GatewayResponse struct {
	TS                         time.Time
	RequestID, Tenant, Model   string
	Status                     uint16
	Prompt, Completion, Cached uint64
	TTFTMs, DurationMs         float64
	PrefillEP, DecodeEP        string
	Room                       uint64
	PrefillRID, DecodeRID      string
	Line                       uint64
}

// BatchStat is one batch_stats row: a scheduler "Prefill batch" or "Decode
// batch" line. Counters the line did not carry are -1; FieldKeys and
// FieldValues keep every pair as logged (field names drift across SGLang
// versions). No analyzer reads it yet; ingest writes it.
type BatchStat struct {
	TS           time.Time
	Node, Role   string
	DPRank       int16
	Kind         string // prefill | decode
	NewSeq       uint32
	NewToken     uint64
	CachedToken  uint64
	NumToken     uint64
	TokenUsage   float64
	RunningReq   int32
	QueueReq     int32
	BootstrapReq int32
	InflightReq  int32
	PreallocReq  int32
	TransferReq  int32
	RetractedReq int32
	Throughput   float64
	FieldKeys    []string
	FieldValues  []string
	Line         uint64
}

// PageEvent is one page_events row: a page-level KV event of a decode
// engine that logs them (exact lineage).
type PageEvent struct {
	TS     time.Time
	Node   string
	DPRank int16
	Event  string // PageAlloc | PageFree | PageWrite | PageRead
	RID    string
	Room   uint64
	Pages  []uint32
	Line   uint64
	Msg    uint8 // as EngineEvent.Msg
}

// Canary probe verdicts the analysis turns into findings.
const (
	VerdictLeak            = "leak"
	VerdictOverLimitServed = "over_limit_served"
)

// ProbeVerdict is one probes row with a verdict worth a finding (a leak or
// an over-limit prompt answered 200).
type ProbeVerdict struct {
	ID, Identity, Endpoint, Kind, Marker string
	TS                                   time.Time
	Stream                               bool
	ThresholdTokens                      uint64
	ThresholdNode                        string
	Prompt, Completion                   uint64
	HTTPStatus                           uint16
	Answer                               string
	ForeignMarkers                       []string
	Verdict                              string
}

// ProbeMarker is the probe that sent a marker.
type ProbeMarker struct {
	Marker, ProbeID, Identity, Kind string
	TS                              time.Time
}

// DataSpan is the time range the request-level tables cover and the ingest
// watermark (the latest ingested_at).
type DataSpan struct {
	From, To, Watermark time.Time
}
