package domain

import (
	"strconv"
	"strings"
	"time"
)

// U64 is a 64-bit id (bootstrap room, line id) that JSON carries as a
// string: JavaScript numbers lose precision above 2^53.
type U64 uint64

// MarshalJSON writes the id as a decimal string.
func (u U64) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatUint(uint64(u), 10) + `"`), nil
}

// String is the decimal form used in URLs and templates.
func (u U64) String() string { return strconv.FormatUint(uint64(u), 10) }

// UnmarshalJSON reads the decimal string (or a number).
func (u *U64) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseUint(strings.Trim(string(b), `"`), 10, 64)
	*u = U64(n)
	return err
}

// CaseBucket is the number of affected requests (findings naming a
// request) of one analyzer and severity in one hour of a case.
type CaseBucket struct {
	Hour     time.Time `ch:"hour" json:"hour"`
	Analyzer string    `ch:"analyzer" json:"analyzer"`
	Severity string    `ch:"severity" json:"severity"`
	N        uint64    `ch:"n" json:"requests"`
}

// PromptPoint is one hour of a prefill node's prompts: the longest, and
// how many were over the limit in force.
type PromptPoint struct {
	Node  string    `ch:"node" json:"node"`
	Hour  time.Time `ch:"hour" json:"hour"`
	Max   uint64    `ch:"max_prompt" json:"max_prompt_tokens"`
	Over  uint64    `ch:"over" json:"over_limit"`
	Total uint64    `ch:"n" json:"requests"`
	Limit uint64    `ch:"lim" json:"limit"`
}

// SourceTenant is a tenant on the other side of a request or finding, from the
// affected reconstruction: for a request that received foreign data,
// whose data it was; for a request whose data was exposed, who received it.
type SourceTenant struct {
	Tenant string `json:"tenant"`
	Role   Role   `json:"affected_role"`
	Tier   Tier   `json:"tier,omitempty"`
	// OwnDataOnly: the tenant's request was served from stale pages that
	// held only its own earlier data.
	OwnDataOnly bool `json:"own_data_only,omitempty"`
}

// FindingView is one analyzer conclusion with the lines that prove it.
type FindingView struct {
	FindingID        string    `ch:"finding_id" json:"finding_id"`
	RunID            string    `ch:"run_id" json:"run_id"`
	Analyzer         string    `ch:"analyzer" json:"analyzer"`
	AnalyzerVersion  string    `ch:"analyzer_version" json:"analyzer_version"`
	Severity         string    `ch:"severity" json:"severity"`
	Confidence       float64   `ch:"confidence" json:"confidence"`
	TS               time.Time `ch:"ts" json:"ts"`
	FirstTS          time.Time `ch:"first_ts" json:"first_ts"`
	LastTS           time.Time `ch:"last_ts" json:"last_ts"`
	RequestKey       string    `ch:"request_key" json:"request_key"`
	GatewayRequestID string    `ch:"gateway_request_id" json:"gateway_request_id"`
	Tenant           string    `ch:"tenant" json:"tenant"`
	Room             uint64    `ch:"bootstrap_room" json:"bootstrap_room,string"`
	PrefillNode      string    `ch:"prefill_node" json:"prefill_node"`
	DecodeNode       string    `ch:"decode_node" json:"decode_node"`
	DecodeDPRank     int16     `ch:"decode_dp_rank" json:"decode_dp_rank"`
	Title            string    `ch:"title" json:"title"`
	Explanation      string    `ch:"explanation" json:"explanation"`
	ForeignTenants   []string  `ch:"foreign_tenants" json:"foreign_tenants"`
	EvidenceIDs      []uint64  `ch:"evidence_line_ids" json:"-"`
	Evidence         []U64     `json:"evidence_line_ids"`
}

// FindingQuery filters the findings page.
type FindingQuery struct {
	Analyzer      string    `json:"analyzer,omitempty"`
	Severity      string    `json:"severity,omitempty"`
	MinConfidence float64   `json:"min_confidence,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
	Tenant        string    `json:"tenant,omitempty"`
	From          time.Time `json:"from"`
	To            time.Time `json:"to"`
	Limit         int       `json:"limit"`
	Cursor        string    `json:"cursor,omitempty"`
}

// FindingPage is one page of findings, newest first, and the total.
type FindingPage struct {
	Query     FindingQuery  `json:"query"`
	Findings  []FindingView `json:"findings"`
	Total     uint64        `json:"total"`
	Next      string        `json:"next,omitempty"`
	Analyzers []string      `json:"analyzers"`
}

// FindingDetail is one finding with its evidence lines.
type FindingDetail struct {
	Finding FindingView    `json:"finding"`
	Lines   []EvidenceLine `json:"evidence_lines"`
	// Sources and OwnDataOnly: see Timeline.
	Sources     []SourceTenant `json:"sources"`
	OwnDataOnly bool           `json:"own_data_only"`
}

// FindingBucket is the number of findings of one analyzer and severity in
// one hour.
type FindingBucket struct {
	Hour     time.Time `ch:"hour" json:"hour"`
	Analyzer string    `ch:"analyzer" json:"analyzer"`
	Severity string    `ch:"severity" json:"severity"`
	N        uint64    `ch:"n" json:"count"`
}

// IngestSource is one ingest source with its completeness counters.
type IngestSource struct {
	SourceID        string    `ch:"source_id" json:"source_id"`
	Path            string    `ch:"path" json:"path"`
	Node            string    `ch:"node" json:"node"`
	Role            string    `ch:"role" json:"role"`
	LogFormat       string    `ch:"log_format" json:"log_format"`
	FirstTS         time.Time `ch:"first_ts" json:"first_ts"`
	LastTS          time.Time `ch:"last_ts" json:"last_ts"`
	Lines           uint64    `ch:"lines" json:"lines"`
	Parsed          uint64    `ch:"parsed" json:"parsed"`
	Unknown         uint64    `ch:"unknown" json:"unknown"`
	Malformed       uint64    `ch:"malformed" json:"malformed"`
	Bytes           uint64    `ch:"bytes" json:"bytes"`
	CommittedOffset uint64    `ch:"committed_offset" json:"committed_offset"`
	Size            uint64    `ch:"size" json:"size"`
	Complete        uint8     `ch:"complete" json:"complete"`
	UpdatedAt       time.Time `ch:"updated_at" json:"updated_at"`
}

// Pushed reports a source that arrives through the push endpoints (Loki
// push, /ingest/v1/lines): a stream, with no file size or end to reach.
func (r IngestSource) Pushed() bool { return r.Size == 0 && r.CommittedOffset == 0 }

// Incomplete reports a file source not read to its end. A pushed stream is
// never "incomplete": it has no end.
func (r IngestSource) Incomplete() bool {
	return !r.Pushed() && (r.Complete == 0 || r.CommittedOffset < r.Size)
}

// NodeGap is a stretch in which a node logged nothing while the rest of the
// fleet did, found by analyze's completeness rule (see Gaps).
type NodeGap struct {
	Node    string    `json:"node"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Minutes int       `json:"minutes"`
}

// RequestRow is one client response from gateway_responses.
type RequestRow struct {
	TS               time.Time `ch:"ts" json:"ts"`
	TSNS             uint64    `ch:"ts_ns" json:"ts_ns,string"`
	RequestID        string    `ch:"request_id" json:"request_id"`
	Tenant           string    `ch:"tenant" json:"tenant"`
	Model            string    `ch:"model" json:"model"`
	Status           uint16    `ch:"status" json:"status"`
	PromptTokens     uint64    `ch:"prompt_tokens" json:"prompt_tokens"`
	CompletionTokens uint64    `ch:"completion_tokens" json:"completion_tokens"`
	CachedTokens     uint64    `ch:"cached_tokens" json:"cached_tokens"`
	TTFTMs           float64   `ch:"ttft_ms" json:"ttft_ms"`
	DurationMs       float64   `ch:"duration_ms" json:"duration_ms"`
	PrefillEndpoint  string    `ch:"prefill_endpoint" json:"prefill_endpoint"`
	DecodeEndpoint   string    `ch:"decode_endpoint" json:"decode_endpoint"`
	Room             uint64    `ch:"bootstrap_room" json:"bootstrap_room,string"`
	PrefillRID       string    `ch:"prefill_rid" json:"prefill_rid"`
	DecodeRID        string    `ch:"decode_rid" json:"decode_rid"`
	Gateway          string    `ch:"gateway" json:"gateway"`
	LineID           uint64    `ch:"line_id" json:"line_id,string"`
	// Affected marks, on a case's tenant view, a request the case's
	// reconstruction names.
	Affected bool `json:"affected,omitempty"`
}

// SearchQuery is the request search form. Zero values mean "any". Tenant
// matches case-insensitively, and "acme*" is a prefix search.
type SearchQuery struct {
	RequestID string    `json:"request_id,omitempty"`
	RID       string    `json:"rid,omitempty"`
	Room      uint64    `json:"bootstrap_room,omitempty,string"`
	Tenant    string    `json:"tenant,omitempty"`
	Node      string    `json:"node,omitempty"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Status    string    `json:"status,omitempty"`
	MinPrompt uint64    `json:"min_prompt,omitempty"`
	MaxPrompt uint64    `json:"max_prompt,omitempty"`
	Sort      string    `json:"sort"`
	Limit     int       `json:"limit"`
	Cursor    string    `json:"cursor,omitempty"`
}

// SearchPage is one page of results and the honest total of all matches.
type SearchPage struct {
	Query SearchQuery  `json:"query"`
	Rows  []RequestRow `json:"rows"`
	Total uint64       `json:"total"`
	Next  string       `json:"next,omitempty"`
}

// SearchSorts are the orders the request search offers (newest or oldest
// first, longest or shortest prompt first).
var SearchSorts = []string{"ts_desc", "ts_asc", "prompt_desc", "prompt_asc"}
