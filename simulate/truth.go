package simulate

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"
)

// Fault classes and look-alike classes as named in truth.json.
const (
	ClassRejectedPlaceholder = "rejected_placeholder"
	ClassAbortReuse          = "abort_reuse"
	ClassMetadataCollision   = "metadata_collision"

	LookLongPromptImmune = "long_prompt_immune"
	LookPrefixCacheTTFT  = "prefix_cache_short_ttft"
	LookTransferTimeout  = "transfer_timeout_500"
	LookClientAbort      = "client_abort"
	LookRetraction       = "retraction"
	LookRejectedNonPD    = "rejected_non_pd_400"
	LookContextLength    = "context_length_400"
	LookMetadataCaught   = "metadata_collision_caught"
	LookNodeRestart500   = "node_restart_500"
)

// Truth is the ground truth of one simulation run (truth.json).
type Truth struct {
	Scenario string            `json:"scenario"`
	Seed     int64             `json:"seed"`
	Scale    float64           `json:"scale"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
	Requests int               `json:"requests"`
	Faults   []string          `json:"faults"`
	Nodes    []NodeTruth       `json:"nodes"`
	Affected []AffectedRequest `json:"affected"`
	// ReceivedForeignData: tenants with a request served another tenant's KV.
	ReceivedForeignData []string `json:"received_foreign_data"`
	// PossiblyExposed: tenants whose KV another tenant's request read.
	PossiblyExposed []string `json:"possibly_exposed"`
	// AffectedTenants: tenants with any affected request (including ones
	// that read only never-written or same-tenant pages).
	AffectedTenants []string       `json:"affected_tenants"`
	Lookalikes      []Lookalike    `json:"lookalikes"`
	LookalikeCounts map[string]int `json:"lookalike_counts"`
}

// NodeTruth is one engine boot and the limits it ran with.
type NodeTruth struct {
	Node           string    `json:"node"`
	Role           string    `json:"role"`
	Boot           time.Time `json:"boot"`
	Version        string    `json:"sglang_version"`
	MaxTotalTokens int       `json:"max_total_num_tokens"`
	ContextLen     int       `json:"context_len"`
	MaxReqInputLen int       `json:"max_req_input_len"`
	PageSize       int       `json:"page_size"`
	DPSize         int       `json:"dp_size"`
	Canary         bool      `json:"canary,omitempty"`
	Endpoint       string    `json:"endpoint"`
	ClockSkew      string    `json:"clock_skew"`
}

// AffectedRequest is a request whose response was computed from KV data
// that was not its own.
type AffectedRequest struct {
	RequestID     string    `json:"request_id"`
	Tenant        string    `json:"tenant"`
	Class         string    `json:"class"`
	TS            time.Time `json:"ts"`
	BootstrapRoom uint64    `json:"bootstrap_room"`
	PrefillNode   string    `json:"prefill_node"`
	PrefillRID    string    `json:"prefill_rid"`
	DecodeNode    string    `json:"decode_node"`
	DecodeRID     string    `json:"decode_rid"`
	DecodeDPRank  int       `json:"decode_dp_rank"`
	PromptTokens  int       `json:"prompt_tokens"`
	PrefillLimit  int       `json:"prefill_max_req_input_len"`
	PrefillPool   int       `json:"prefill_max_total_num_tokens"`
	StalePages    int       `json:"stale_pages"`
	NeverWritten  int       `json:"never_written_pages"`
	Sources       []Source  `json:"sources"`
	// ForeignTenants are the other tenants whose data this request read.
	ForeignTenants []string `json:"foreign_tenants"`
}

// Source is a request whose data a victim read, and on how many pages.
type Source struct {
	RequestID     string `json:"request_id"`
	Tenant        string `json:"tenant"`
	BootstrapRoom uint64 `json:"bootstrap_room"`
	Pages         int    `json:"pages"`
	// PromptPages / OutputPages split Pages by what the source had written
	// there last: its prompt (KV transferred from prefill) or its generated
	// output (decode steps). A metadata-buffer source has neither.
	PromptPages int `json:"prompt_pages"`
	OutputPages int `json:"output_pages"`
}

// Lookalike is a benign request that resembles a fault.
type Lookalike struct {
	RequestID string `json:"request_id"`
	Tenant    string `json:"tenant"`
	Class     string `json:"class"`
}

// LoadTruth reads a truth.json written by Run.
func LoadTruth(path string) (*Truth, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read truth: %w", err)
	}
	var t Truth
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("parse truth %s: %w", path, err)
	}
	return &t, nil
}

// truthBuilder accumulates truth while the simulation streams.
type truthBuilder struct {
	t        Truth
	received map[string]bool
	exposed  map[string]bool
	affected map[string]bool
}

func newTruthBuilder() *truthBuilder {
	return &truthBuilder{received: map[string]bool{}, exposed: map[string]bool{}, affected: map[string]bool{},
		t: Truth{LookalikeCounts: map[string]int{}}}
}

func (tb *truthBuilder) addAffected(a AffectedRequest) {
	tb.affected[a.Tenant] = true
	for _, f := range a.ForeignTenants {
		tb.received[a.Tenant] = true
		tb.exposed[f] = true
	}
	tb.t.Affected = append(tb.t.Affected, a)
}

func (tb *truthBuilder) addLookalike(id, tenant, class string) {
	tb.t.Lookalikes = append(tb.t.Lookalikes, Lookalike{id, tenant, class})
	tb.t.LookalikeCounts[class]++
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (tb *truthBuilder) finish() *Truth {
	tb.t.ReceivedForeignData = sortedKeys(tb.received)
	tb.t.PossiblyExposed = sortedKeys(tb.exposed)
	tb.t.AffectedTenants = sortedKeys(tb.affected)
	return &tb.t
}
