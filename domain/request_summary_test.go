package domain

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// The summary an analysis keeps of a victim stands in for the request in
// the conclusions: each field is what the request's own accessor gives,
// for every shape of request the linker makes.
func TestRequestSummaryAgreesWithTheRequest(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	gw := &GatewayResponse{TS: t0, RequestID: "req-1", Status: 200, Prompt: 900_000, Completion: 300, Cached: 12,
		DurationMs: 2500, Line: 90}
	prefill := &Side{Node: "prefill-0", RID: "p1", DPRank: -1,
		Recv: &EngineEvent{TS: t0.Add(10 * time.Millisecond), Line: 30},
		Fin:  &EngineEvent{TS: t0.Add(40 * time.Millisecond), Prompt: 1, Line: 40}}
	decode := &Side{Node: "decode-1", RID: "d1", DPRank: 3,
		Recv: &EngineEvent{TS: t0.Add(5 * time.Millisecond), Line: 50},
		Fin:  &EngineEvent{TS: t0.Add(3 * time.Second), Prompt: 900_001, Completion: 280, Line: 70}}
	finOnly := &Side{Node: "decode-2", RID: "d2", DPRank: 0,
		Fin: &EngineEvent{TS: t0.Add(time.Second), Completion: 5, FinishType: "abort", Line: 71}}
	cases := []struct {
		name string
		r    Request
	}{
		{"linked whole", Request{Key: "req-1", TS: t0, Tenant: "acme", Model: "m", Room: 7, GW: gw, Prefill: prefill,
			Decode: decode, Transfer: []*TransferEvent{{Line: 60}, {Line: 60}}, Corrupt: []*TransferEvent{{Line: 61}}}},
		{"gateway only", Request{Key: "req-1", TS: t0, Tenant: "acme", GW: gw}},
		{"engines only", Request{Key: "room:7", TS: t0, Room: 7, Prefill: prefill, Decode: decode}},
		{"decode finish only", Request{Key: "room:8", TS: t0, Room: 8, Decode: finOnly}},
		{"nothing linked", Request{Key: "room:9", TS: t0, Room: 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &tc.r
			s := r.Summary()
			got := []any{s.Key, s.Tenant, s.Model, s.RequestID, s.TS, s.FirstTS, s.LastTS, s.Room, s.RIDs, s.Lines,
				s.Links, s.Status, s.ClientSuccess, s.PromptTokens, s.Completion}
			want := []any{r.Key, r.Tenant, r.Model, r.RequestID(), r.TS, r.FirstTS(), r.LastTS(), r.Room, r.RIDs(),
				r.Lines(), r.Links(), r.Status(), r.ClientSuccess(), r.PromptTokens(), r.Completion()}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("summary\n got %v\nwant %v", got, want)
			}
			var cached uint64
			if r.GW != nil {
				cached = r.GW.Cached
			}
			if s.CachedTokens != cached {
				t.Errorf("cached %d, want %d", s.CachedTokens, cached)
			}
			if s.HasDecode != (r.Decode != nil) {
				t.Errorf("has decode %v", s.HasDecode)
			}
			if r.Decode != nil {
				var recv uint64
				if r.Decode.Recv != nil {
					recv = r.Decode.Recv.Line
				}
				if s.DecodeNode != r.Decode.Node || s.DecodeDPRank != r.Decode.DPRank || s.DecodeRecv != recv {
					t.Errorf("decode %s/%d recv %d", s.DecodeNode, s.DecodeDPRank, s.DecodeRecv)
				}
			} else if s.DecodeNode != "" || s.DecodeDPRank != -1 || s.DecodeRecv != 0 {
				t.Errorf("no decode side, summary has %s/%d recv %d", s.DecodeNode, s.DecodeDPRank, s.DecodeRecv)
			}
			if !reflect.DeepEqual(s.Finding(), r.Finding()) {
				t.Errorf("summary's finding\n%+v\nrequest's\n%+v", s.Finding(), r.Finding())
			}
		})
	}
}

// The finding a whole request starts, field by field.
func TestRequestFinding(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	r := &Request{Key: "req-1", TS: t0, Tenant: "acme", Room: 7,
		GW:      &GatewayResponse{TS: t0, RequestID: "req-1", DurationMs: 2500, Line: 90},
		Prefill: &Side{Node: "prefill-0", RID: "p1", Recv: &EngineEvent{TS: t0.Add(-time.Second), Line: 30}},
		Decode: &Side{Node: "decode-1", RID: "d1", DPRank: 3,
			Fin: &EngineEvent{TS: t0.Add(3 * time.Second), Line: 70}},
		Transfer: []*TransferEvent{{Line: 60}}}
	want := Finding{TS: t0, FirstTS: t0.Add(-time.Second), LastTS: t0.Add(3 * time.Second), RequestKey: "req-1",
		GatewayRequestID: "req-1", Tenant: "acme", Room: 7, RIDs: []string{"p1", "d1"}, Evidence: []uint64{30, 60, 70, 90},
		PrefillNode: "prefill-0", DecodeNode: "decode-1", DecodeDPRank: 3,
		Details: map[string]string{"links": "gateway+prefill+transfer+decode"}}
	if got := r.Finding(); !reflect.DeepEqual(got, want) {
		t.Errorf("finding\n got %+v\nwant %+v", got, want)
	}
}

// Analyzers append to a finding's evidence: two findings started from one
// kept summary must not share their lists with it or with each other.
func TestRequestSummaryFindingsOwnTheirLists(t *testing.T) {
	r := &Request{Key: "req-1", GW: &GatewayResponse{Line: 90}, Prefill: &Side{RID: "p1", Recv: &EngineEvent{Line: 30}},
		Decode: &Side{RID: "d1", Fin: &EngineEvent{Line: 70}}}
	s := r.Summary()
	lines, rids := slices.Clone(s.Lines), slices.Clone(s.RIDs)
	a, b := s.Finding(), s.Finding()
	a.Evidence = append(a.Evidence, 1000)
	b.Evidence = append(b.Evidence, 2000)
	a.RIDs[0] = "changed"
	if a.Evidence[len(a.Evidence)-1] != 1000 || b.Evidence[len(b.Evidence)-1] != 2000 {
		t.Errorf("the findings share their evidence: %v %v", a.Evidence, b.Evidence)
	}
	if !slices.Equal(s.Lines, lines) || !slices.Equal(s.RIDs, rids) {
		t.Errorf("a finding changed the summary: lines %v rids %v", s.Lines, s.RIDs)
	}
}
