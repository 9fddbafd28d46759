package domain

import (
	"slices"
	"time"
)

// RequestSummary is what a finding and the notification list take from a
// linked request, without the request's rows. An analysis read in slices
// keeps one for each victim its slices name, for the conclusions after
// them (the TTFT fit's findings, the reconstruction): about a fifth of the
// memory of the request with its gateway, engine and transfer rows, which
// at 10M requests held 35 MB for 18,777 victims.
type RequestSummary struct {
	Key, Tenant, Model string
	// RequestID is the gateway request id ("" when no gateway line).
	RequestID           string
	TS, FirstTS, LastTS time.Time
	Room                uint64
	RIDs                []string
	Lines               []uint64
	Links               string
	PrefillNode         string
	// HasDecode says a decode side was linked; DecodeNode, DecodeDPRank
	// and DecodeRecv (its Receive line, 0 when none) are its.
	HasDecode     bool
	DecodeNode    string
	DecodeDPRank  int16
	DecodeRecv    uint64
	Status        uint16
	ClientSuccess bool
	// PromptTokens, CachedTokens and Completion are as the Request's
	// methods give them (CachedTokens: the gateway's, 0 when none).
	PromptTokens, CachedTokens, Completion uint64
}

// Summary is the request's summary.
func (f *Request) Summary() RequestSummary {
	s := RequestSummary{
		Key: f.Key, Tenant: f.Tenant, Model: f.Model, RequestID: f.RequestID(),
		TS: f.TS, FirstTS: f.FirstTS(), LastTS: f.LastTS(), Room: f.Room,
		RIDs: f.RIDs(), Lines: f.Lines(), Links: f.Links(), DecodeDPRank: -1,
		Status: f.Status(), ClientSuccess: f.ClientSuccess(),
		PromptTokens: f.PromptTokens(), Completion: f.Completion(),
	}
	if f.GW != nil {
		s.CachedTokens = f.GW.Cached
	}
	if f.Prefill != nil {
		s.PrefillNode = f.Prefill.Node
	}
	if d := f.Decode; d != nil {
		s.HasDecode, s.DecodeNode, s.DecodeDPRank = true, d.Node, d.DPRank
		if d.Recv != nil {
			s.DecodeRecv = d.Recv.Line
		}
	}
	return s
}

// Finding starts a finding about this request, as Request.Finding does.
// Its lists are its own: analyzers append to a finding's evidence.
func (s *RequestSummary) Finding() Finding {
	c := *s
	c.RIDs, c.Lines = slices.Clone(s.RIDs), slices.Clone(s.Lines)
	return c.finding()
}

// finding is Finding with the summary's own lists.
func (s *RequestSummary) finding() Finding {
	return Finding{
		TS: s.TS, FirstTS: s.FirstTS, LastTS: s.LastTS, RequestKey: s.Key, GatewayRequestID: s.RequestID,
		Tenant: s.Tenant, Room: s.Room, RIDs: s.RIDs, Evidence: s.Lines,
		PrefillNode: s.PrefillNode, DecodeNode: s.DecodeNode, DecodeDPRank: s.DecodeDPRank,
		Details: map[string]string{"links": s.Links},
	}
}
