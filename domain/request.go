package domain

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// A request as the analysis links it: the gateway's response, the prefill
// and decode engines' lines (Sides) and the transfer lines between them,
// joined by bootstrap room (request_facts holds one row per Request).

// Side is one engine's view of a request (prefill or decode).
type Side struct {
	Node     string
	RID      string
	DPRank   int16 // -1 when unknown
	Recv     *EngineEvent
	Fin      *EngineEvent
	Boot     *Boot
	Rejected *EngineEvent // input-too-long / capacity rejection line (§c1, §c3)
}

// TS is when the engine first saw the request.
func (s *Side) TS() time.Time {
	switch {
	case s == nil:
		return time.Time{}
	case s.Recv != nil:
		return s.Recv.TS
	case s.Fin != nil:
		return s.Fin.TS
	}
	return time.Time{}
}

// End is when the engine finished the request (zero if no Finish line).
func (s *Side) End() time.Time {
	if s == nil || s.Fin == nil {
		return time.Time{}
	}
	return s.Fin.TS
}

// Prompt is the prompt length the engine reported at Finish.
func (s *Side) Prompt() uint64 {
	if s == nil || s.Fin == nil {
		return 0
	}
	return s.Fin.Prompt
}

// Served reports a Finish that was not an abort.
func (s *Side) Served() bool {
	return s != nil && s.Fin != nil && !s.Fin.Aborted()
}

// Request is one client request linked across gateway, prefill, transfer and
// decode. Any link may be missing; Links says which were found.
type Request struct {
	Key       string
	TS        time.Time
	GW        *GatewayResponse
	Tenant    string
	Model     string
	Room      uint64
	Prefill   *Side
	Decode    *Side
	Transfer  []*TransferEvent
	Corrupt   []*TransferEvent // context corruption lines naming this room (either side)
	Unified   bool
	PrefillEP string
	DecodeEP  string
}

// Links names the parts that were found, e.g. "gateway+prefill+decode".
// The 16 names are built once: an analysis names every request it saves.
func (f *Request) Links() string {
	var k int
	if f.GW != nil {
		k |= 1
	}
	if f.Prefill != nil {
		k |= 2
	}
	if len(f.Transfer) > 0 {
		k |= 4
	}
	if f.Decode != nil {
		k |= 8
	}
	return linkNames[k]
}

// linkNames[k] joins the parts whose bits k has, in Links' order.
var linkNames = func() (out [16]string) {
	parts := []string{"gateway", "prefill", "transfer", "decode"}
	for k := range out {
		var p []string
		for i, name := range parts {
			if k&(1<<i) != 0 {
				p = append(p, name)
			}
		}
		out[k] = strings.Join(p, "+")
	}
	return out
}()

// Status is the client's HTTP status (0 when no gateway line).
func (f *Request) Status() uint16 {
	if f.GW == nil {
		return 0
	}
	return f.GW.Status
}

// ClientSuccess reports that the client was told the request succeeded:
// the gateway's 200 with completion tokens, or (no gateway line) a normal
// decode Finish with completion tokens.
func (f *Request) ClientSuccess() bool {
	if f.GW != nil {
		return f.GW.Status == 200 && f.GW.Completion > 0
	}
	return f.Decode.Served() && f.Decode.Fin.Completion > 0
}

// PromptTokens is the full prompt length: the larger of what the gateway
// and the decode engine reported (the prefill may have seen a placeholder).
func (f *Request) PromptTokens() uint64 {
	var p uint64
	if f.GW != nil {
		p = f.GW.Prompt
	}
	if d := f.Decode.Prompt(); d > p {
		p = d
	}
	return p
}

// Completion is the completion tokens the client got (gateway, else decode).
func (f *Request) Completion() uint64 {
	if f.GW != nil {
		return f.GW.Completion
	}
	if f.Decode != nil && f.Decode.Fin != nil {
		return f.Decode.Fin.Completion
	}
	return 0
}

// RequestID is the gateway request id, or the key when unknown.
func (f *Request) RequestID() string {
	if f.GW != nil {
		return f.GW.RequestID
	}
	return ""
}

// RIDs lists the engine rids.
func (f *Request) RIDs() []string {
	var out []string
	for _, s := range []*Side{f.Prefill, f.Decode} {
		if s != nil && s.RID != "" {
			out = append(out, s.RID)
		}
	}
	return out
}

// Lines lists the raw lines behind the fact.
func (f *Request) Lines() []uint64 {
	// One allocation: an analysis lists the lines of every request it
	// saves (at 2M requests, 1.2 CPU-seconds when each side and the sort
	// took one of their own).
	out := make([]uint64, 0, 7+len(f.Transfer)+len(f.Corrupt))
	if f.GW != nil {
		out = append(out, f.GW.Line)
	}
	for _, s := range [2]*Side{f.Prefill, f.Decode} {
		if s == nil {
			continue
		}
		for _, e := range [3]*EngineEvent{s.Recv, s.Fin, s.Rejected} {
			if e != nil {
				out = append(out, e.Line)
			}
		}
	}
	for _, t := range f.Transfer {
		out = append(out, t.Line)
	}
	for _, t := range f.Corrupt {
		out = append(out, t.Line)
	}
	return uniqSortedU64(out)
}

// PrefillRejected reports evidence that the prefill scheduler rejected or
// aborted the request: a rejection line, an abort finish, or a Finish with
// a 1-token prompt while the client sent more (the §c1 placeholder).
func (f *Request) PrefillRejected() (bool, string) {
	p := f.Prefill
	if p == nil {
		return false, ""
	}
	if p.Rejected != nil {
		return true, "rejection line"
	}
	if p.Fin != nil && p.Fin.Aborted() {
		return true, "abort finish (" + p.Fin.FinishMsg + ")"
	}
	if p.Fin != nil && p.Fin.Prompt == 1 && f.PromptTokens() > 1 {
		return true, "prefill Finish with prompt_tokens=1 (placeholder)"
	}
	return false, ""
}

// FirstTS is the earliest time any part of the request was seen.
func (f *Request) FirstTS() time.Time {
	t := f.TS
	for _, s := range []*Side{f.Prefill, f.Decode} {
		if x := s.TS(); !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	return t
}

// LastTS is when the request ended: the gateway response's end or the
// engines' Finish, whichever is later.
func (f *Request) LastTS() time.Time {
	t := f.TS
	if f.GW != nil {
		t = f.GW.TS.Add(time.Duration(f.GW.DurationMs * float64(time.Millisecond)))
	}
	for _, s := range []*Side{f.Prefill, f.Decode} {
		if x := s.End(); x.After(t) {
			t = x
		}
	}
	return t
}

// Finding starts a finding about this request: its times, keys, nodes
// and evidence lines, for an analyzer to fill in.
func (f *Request) Finding() Finding {
	s := f.Summary()
	return s.finding()
}

// ReusedKey is the key of a gateway response whose request id another
// request reused (a client-supplied id): the id and the response's line,
// so each is its own request.
func ReusedKey(requestID string, line uint64) string {
	return requestID + "#" + strconv.FormatUint(line, 10)
}

// RoomLines is more lines than one request logs under its bootstrap room
// (a Receive and a Finish or a rejection on each side, its metrics, a few
// retries). A room naming more is shared by many requests: a router that
// derives rooms from a request id the client left unset gives every
// concurrent request the same one. Linking (analyze) and the request page
// (the UI's reads) then take a request's lines by its rids, not its room.
const RoomLines = 64

// uniqSortedU64 sorts v in place and returns its distinct non-zero values.
func uniqSortedU64(v []uint64) []uint64 {
	slices.Sort(v)
	n := 0
	for _, x := range v {
		if x != 0 && (n == 0 || x != v[n-1]) {
			v[n] = x
			n++
		}
	}
	return v[:n]
}
