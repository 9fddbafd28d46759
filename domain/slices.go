package domain

import (
	"sort"
	"time"
)

// Bucket is a count of requests in a time bucket starting at Start.
type Bucket struct {
	Start time.Time
	N     uint64
}

// FactRef points back at a saved request fact: its key, room and time, and
// the evidence lines it was linked from (enough to link it again), with
// the few fields that name a writer room's owner without linking it.
type FactRef struct {
	Key        string
	Room       uint64
	TS         time.Time
	Lines      []uint64
	Version    uint64
	Tenant     string
	Model      string
	DecodeNode string
	// DecodeDPRank is the decode side's DP rank as linked (-1: unknown).
	DecodeDPRank int16
}

// SortFactRefs orders refs by time, then key (deterministic).
func SortFactRefs(refs []FactRef) {
	sort.Slice(refs, func(i, j int) bool {
		if !refs[i].TS.Equal(refs[j].TS) {
			return refs[i].TS.Before(refs[j].TS)
		}
		return refs[i].Key < refs[j].Key
	})
}

// EvidenceSink receives evidence rows by kind.
type EvidenceSink struct {
	Gateway  func(*GatewayResponse) error
	Engine   func(*EngineEvent) error
	Transfer func(*TransferEvent) error
}

// SpeedPoint is what the impossible-speed fit reads of one request: the
// prefill node that computed it and the gateway's numbers.
type SpeedPoint struct {
	Key          string
	TS           time.Time
	PrefillNode  string
	Prompt       uint64 // the gateway's prompt tokens (the decode's when the gateway gave none)
	DecodePrompt uint64
	Cached       uint64
	TTFTMs       float64
	Status       uint16
}

// SpeedBounds are the impossible-speed fit's bounds, one per prefill node
// whose traffic gave a fit: a point of a node with u uncached prompt tokens
// and time to first token t lies under its bound when u >= MinUncached and
// t < min(want - Margin, Ratio × want), want = Intercept + Slope × u.
type SpeedBounds struct {
	Nodes       []SpeedBound
	MinUncached uint64
	Ratio       float64
}

// SpeedBound is one prefill node's fitted TTFT line and how far below it a
// point must lie (its robust sigmas, in ms).
type SpeedBound struct {
	Node                     string
	Intercept, Slope, Margin float64
}

// Under reports whether a point of b's node lies under it, computed in the
// order the store's prefilter computes it.
func (s SpeedBounds) Under(b SpeedBound, u, t float64) bool {
	if u < float64(s.MinUncached) {
		return false
	}
	want := b.Intercept + b.Slope*u
	return t < want-b.Margin && t < s.Ratio*want
}

// ReplayPart is a piece of an analysis job's shared allocator replay: an
// ask (Kind "ask": what the concluding worker needs replayed) or one
// decode node's answer to it (Kind "answer", Unit the node's unit), both
// JSON in Data.
type ReplayPart struct {
	Job, Ask, Unit, Worker, Kind, Data string
}

// SliceResult is what one analyzer made of one slice of a worker's job:
// its findings and the state it carries to the window's end (both JSON).
type SliceResult struct {
	Job      string
	Slice    uint32
	Worker   string
	Analyzer string
	Findings string
	State    string
	// Error is the analyzer's failure on the slice (its run is then an
	// ERROR run).
	Error string
}

// CutWindow cuts w into consecutive spans of at most max counted items
// each, at bucket starts (buckets in time order; a single bucket holding
// more is one span of its own). max <= 0, or everything fitting, gives w
// whole. The analysis cuts its slices by requests per minute with it, the
// store its minute counts by lines per minute.
func CutWindow(buckets []Bucket, w Window, max int) []Window {
	if max <= 0 || len(buckets) == 0 {
		return []Window{w}
	}
	var total uint64
	for _, b := range buckets {
		total += b.N
	}
	if total <= uint64(max) {
		return []Window{w}
	}
	var out []Window
	from := w.From
	var n uint64
	for _, b := range buckets {
		if n > 0 && n+b.N > uint64(max) && b.Start.After(from) {
			out = append(out, Window{From: from, To: b.Start})
			from, n = b.Start, 0
		}
		n += b.N
	}
	return append(out, Window{From: from, To: w.To})
}
