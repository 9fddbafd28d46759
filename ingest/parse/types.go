package parse

import "time"

// Format names a source format. The string values are stored in the format
// column of raw_lines, so they must not change.
type Format string

const (
	FormatUnknown        Format = "unknown"
	FormatSGLang         Format = "sglang"          // engine text log (§0–§d)
	FormatSGLangJSON     Format = "sglang-json"     // --log-requests-format json (§d); parsed by the SGLang parser
	FormatRequestMetrics Format = "request-metrics" // sglang-request-metrics-*.log (§d)
	FormatGlog           Format = "mooncake-glog"   // Mooncake transfer engine (§g)
	FormatGateway        Format = "gateway-json"    // kvtrail canonical response line (docs/formats.md)
	FormatModelGateway   Format = "sgl-model-gateway"
	FormatPrometheus     Format = "prometheus" // text exposition / OpenMetrics (§f)
	FormatPageEvents     Format = "page-events"
)

// Formats lists every format New accepts, in detection priority order
// (registry.go says how each is built and split into records).
var Formats = []Format{FormatSGLang, FormatSGLangJSON, FormatRequestMetrics, FormatGlog,
	FormatGateway, FormatModelGateway, FormatPrometheus, FormatPageEvents}

// Status says how far a record was understood (raw_lines.parse_status).
type Status string

const (
	// StatusParsed: a known message; the payload is filled in.
	StatusParsed Status = "parsed"
	// StatusUnknown: well-formed but not a message kvtrail extracts. Not an error.
	StatusUnknown Status = "unknown"
	// StatusMalformed: looked like a known message but could not be read;
	// Reason says why.
	StatusMalformed Status = "malformed"
	// StatusNoise: a line kvtrail recognises and deliberately does not
	// extract (progress bars, startup chatter, NCCL/Gloo/NIXL info, …), so
	// that StatusUnknown means "new to kvtrail" and is worth a look.
	StatusNoise Status = "noise"
)

// Kind is the kind of a parsed record (raw_lines.kind); it also says which
// payload field of Parsed is set.
type Kind string

const (
	KindNone       Kind = ""
	KindBoot       Kind = "boot"     // Parsed.Boot
	KindEngine     Kind = "engine"   // Parsed.Engine
	KindBatch      Kind = "batch"    // Parsed.Batch
	KindTransfer   Kind = "transfer" // Parsed.Transfer
	KindGateway    Kind = "gateway"  // Parsed.Gateway
	KindMetric     Kind = "metric"   // Parsed.Metrics
	KindMetricMeta Kind = "metric_meta"
	KindPage       Kind = "page" // Parsed.Page
	// KindMarker: a recognised line without a table payload (glog preamble,
	// Prometheus # EOF).
	KindMarker Kind = "marker"
)

// Parsed is the result of parsing one Record. Exactly the payload named by
// Kind is non-nil. TS is UTC with the source's clock offset applied; it is
// zero when the record carries no time (the pipeline then falls back to the
// previous record's time).
type Parsed struct {
	Status Status
	Reason string // why Status is malformed (or a note for unknown)
	Kind   Kind
	Event  string // event name within the kind, e.g. "rejected", "decode"
	// Family is the line family the record was classified as (registry.go),
	// "" for a line of no known shape. Format is the format whose parser
	// read it (the source's format for a line of no known shape).
	Family string
	Format Format
	TS     time.Time
	// TSInferred is set when part of TS was not in the line (glog short
	// form without a configured year).
	TSInferred bool

	// Join keys, copied from the payload for the raw_lines/id_index rows.
	RID           string
	BootstrapRoom uint64

	Boot     *BootFacts
	Engine   *EngineEvent
	Batch    *BatchStat
	Transfer *TransferEvent
	Gateway  *GatewayResponse
	Metrics  []MetricSample
	Page     *PageEvent

	// More holds further messages found in the same record: SGLang lines
	// glued together without a newline (§a4 note), each parsed on its own.
	More []Parsed
}

// Ranks are the parallel ranks from an SGLang scheduler prefix (§0). A rank
// that the prefix did not carry is -1.
type Ranks struct {
	DP, PP, TP, EP, AttnCP, MoeDP, CP int16
}

// NoRanks is the Ranks value of a line without rank tokens.
var NoRanks = Ranks{-1, -1, -1, -1, -1, -1, -1}

// BootFacts are startup facts of one engine boot (node_boots). A single
// line yields the facts it carries (Fact names it); BootTracker folds them.
type BootFacts struct {
	Fact   string // server_args | kv_allocated | limits | memory_pool_end | load_weight_end | ready
	BootTS time.Time
	BootID string // set by BootTracker
	Ranks  Ranks

	DisaggregationMode string // 'null' | 'prefill' | 'decode'
	TransferBackend    string
	ModelPath          string
	PageSize           uint32
	ContextLen         uint64 // limits line context_len, else server_args context_length
	MaxTotalNumTokens  uint64
	MaxReqInputLen     uint64 // derived, §a4
	MaxPrefillTokens   uint64
	ChunkedPrefillSize int64
	MaxRunningRequests uint64
	KVPoolTokens       uint64
	TPSize             uint16
	DPSize             uint16
	PPSize             uint16
	EPSize             uint16
	MemFractionStatic  float64
	AllowAutoTruncate  bool
	// MaxTotalTokens is the --max-total-tokens server argument (0 = None).
	MaxTotalTokens int64

	// ArgKeys/ArgValues hold every server_args pair in logged order. String
	// values are unquoted; other values keep their Python repr.
	ArgKeys   []string
	ArgValues []string

	// Details of single-line facts.
	KVCacheName string  // "KV Cache", "SWA KV Cache", "Mamba Cache", …
	KVDtype     string  // "torch.bfloat16" (≥ v0.5.14 only)
	KVSizeGB    float64 // KV size (MLA) or K+V size
	AvailMemGB  float64 // avail mem / available_gpu_mem

	// Facts counts the lines folded in; Offsets are their byte offsets.
	Facts   uint32
	Offsets []int64
}

// EngineEvent is a per-request engine line (engine_events).
type EngineEvent struct {
	Ranks            Ranks
	Event            string // received | received_openai | finished | rejected | truncated | context_exceeded | capacity_exceeded | expand_exceeded | http_access | request_metrics
	RID              string
	BootstrapRoom    uint64
	BootstrapHost    string
	BootstrapPort    uint32
	PromptTokens     uint64
	CompletionTokens uint64
	CachedTokens     uint64
	InputLen         uint64
	LimitTokens      uint64
	FinishType       string
	FinishMessage    string
	StatusCode       uint16
	E2ELatencyMs     float64
	// uvicorn access lines (§0)
	Client, Method, Path string
}

// BatchStat is a scheduler "Prefill batch" / "Decode batch" line
// (batch_stats, §b). Int32 counters that the line did not carry are -1;
// FieldKeys/FieldValues keep every pair as logged.
type BatchStat struct {
	Ranks        Ranks
	Kind         string // prefill | decode
	Iter         int64  // the " [N]" iteration, -1 when absent
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
}

// TransferEvent is a KV transfer / bootstrap / metadata problem
// (transfer_events, §c4–§c5, §g).
type TransferEvent struct {
	Ranks         Ranks
	Source        string // sglang | mooncake
	Event         string
	RID           string
	BootstrapRoom uint64
	OtherRoom     uint64
	MetadataIndex int64 // -1 when absent
	Reason        string
	Peer          string
	NIC           string
}

// GatewayResponse is what a client was told (gateway_responses).
type GatewayResponse struct {
	RequestID        string
	Tenant           string
	Model            string
	Status           uint16
	PromptTokens     uint64
	CompletionTokens uint64
	CachedTokens     uint64
	TTFTMs           float64
	DurationMs       float64
	PrefillEndpoint  string
	DecodeEndpoint   string
	BootstrapRoom    uint64
	PrefillRID       string
	DecodeRID        string
	Gateway          string
	// sgl-model-gateway logs only
	Method, URI string
}

// MetricSample is one Prometheus sample (metric_samples). Labels are sorted
// by key.
type MetricSample struct {
	TS          time.Time
	TSMs        int64
	Name        string
	Type        string // from # TYPE, when seen
	SeriesID    uint64
	LabelKeys   []string
	LabelValues []string
	Value       float64
}

// PageEvent is a page-level KV event (page_events).
type PageEvent struct {
	Node          string
	DPRank        int16
	Event         string // alloc | free | write | read
	RID           string
	BootstrapRoom uint64
	Pages         []uint32
}
