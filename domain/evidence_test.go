package domain

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The request's derived views: which parts were linked, the lines behind
// it, and whether the prefill refused it, for the shapes a request takes.
func TestRequestViews(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	gw := &GatewayResponse{RequestID: "q", TS: t0, Status: 200, Prompt: 9000, Completion: 5, DurationMs: 1500, Line: 7}
	for _, tc := range []struct {
		name       string
		r          Request
		links      string
		lines      []uint64
		rejected   bool
		prompt     uint64
		clientOK   bool
		first, end time.Time
	}{
		{name: "gateway only", r: Request{TS: t0, GW: gw}, links: "gateway", lines: []uint64{7}, prompt: 9000,
			clientOK: true, first: t0, end: t0.Add(1500 * time.Millisecond)},
		{name: "placeholder prefill (§c1), decode served", r: Request{TS: t0, GW: gw,
			Prefill: &Side{Recv: &EngineEvent{TS: t0.Add(-time.Second), Line: 3},
				Fin: &EngineEvent{TS: t0.Add(time.Second), Prompt: 1, Line: 4}},
			Decode:   &Side{Fin: &EngineEvent{TS: t0.Add(3 * time.Second), Prompt: 9000, Completion: 5, Line: 5}},
			Transfer: []*TransferEvent{{Line: 6}, {Line: 6}}},
			links: "gateway+prefill+transfer+decode", lines: []uint64{3, 4, 5, 6, 7}, rejected: true, prompt: 9000,
			clientOK: true, first: t0.Add(-time.Second), end: t0.Add(3 * time.Second)},
		{name: "rejection line, no gateway", r: Request{TS: t0, Prefill: &Side{Rejected: &EngineEvent{Line: 2}},
			Decode: &Side{Fin: &EngineEvent{TS: t0, FinishType: FinishAbort, Line: 1}}},
			links: "prefill+decode", lines: []uint64{1, 2}, rejected: true, first: t0, end: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &tc.r
			rej, _ := r.PrefillRejected()
			if r.Links() != tc.links || !reflect.DeepEqual(r.Lines(), tc.lines) || rej != tc.rejected ||
				r.PromptTokens() != tc.prompt || r.ClientSuccess() != tc.clientOK {
				t.Fatalf("links %q lines %v rejected %v prompt %d ok %v; want %q %v %v %d %v", r.Links(), r.Lines(), rej,
					r.PromptTokens(), r.ClientSuccess(), tc.links, tc.lines, tc.rejected, tc.prompt, tc.clientOK)
			}
			if !r.FirstTS().Equal(tc.first) || !r.LastTS().Equal(tc.end) {
				t.Fatalf("span %v..%v, want %v..%v", r.FirstTS(), r.LastTS(), tc.first, tc.end)
			}
			if f := r.Finding(); !reflect.DeepEqual(f.Evidence, tc.lines) || f.Details["links"] != tc.links ||
				!f.FirstTS.Equal(tc.first) || !f.LastTS.Equal(tc.end) {
				t.Fatalf("finding started as %+v", f)
			}
		})
	}
}

func TestTransferFailureAndBoots(t *testing.T) {
	for ev, want := range map[string]bool{"decode_transfer_failed": true, "lost_connection": true,
		"session_failed": false, "kv_chunk_skipped": false} {
		if got := (&TransferEvent{Event: ev}).Failure(); got != want {
			t.Errorf("%s without a room: failure %v, want %v", ev, got, want)
		}
	}
	if !(&TransferEvent{Event: "session_failed", Room: 3}).Failure() {
		t.Error("a *_failed event naming a room is a failure")
	}
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	a, b := &Boot{Node: "d", At: t0}, &Boot{Node: "d", At: t0.Add(time.Hour), DPSize: 2,
		Args: map[string]string{"load_balance_method": "'round_robin'"}}
	bs := NewBoots([]*Boot{a, b, {Node: "p", At: t0}})
	if a.Next != b || b.Next != nil || a.End() != b.At || bs.At("d", t0.Add(-time.Second)) != nil ||
		bs.At("d", t0.Add(time.Hour)) != b || !reflect.DeepEqual(bs.Nodes(), []string{"d", "p"}) {
		t.Fatal("boots are not indexed and linked per node in time order")
	}
	if b.FollowsRoom() || !a.FollowsRoom() {
		t.Fatal("round_robin with dp 2 does not follow the room; dp 1 always does")
	}
}

// Links names each combination of found parts in one order, and Lines
// lists every line once, sorted, without the zero of a line not stored.
func TestRequestLinksAndLinesEveryShape(t *testing.T) {
	for k := 0; k < 16; k++ {
		var r Request
		var want []string
		if k&1 != 0 {
			r.GW, want = &GatewayResponse{Line: 9}, append(want, "gateway")
		}
		if k&2 != 0 {
			r.Prefill, want = &Side{Recv: &EngineEvent{Line: 4}, Rejected: &EngineEvent{}}, append(want, "prefill")
		}
		if k&4 != 0 {
			r.Transfer, want = []*TransferEvent{{Line: 6}, {Line: 4}}, append(want, "transfer")
		}
		if k&8 != 0 {
			r.Decode, want = &Side{Recv: &EngineEvent{Line: 8}, Fin: &EngineEvent{Line: 2}}, append(want, "decode")
		}
		r.Corrupt = []*TransferEvent{{Line: 8}, {Line: 1}}
		if got := r.Links(); got != strings.Join(want, "+") {
			t.Errorf("shape %04b: links %q, want %q", k, got, strings.Join(want, "+"))
		}
		lines := r.Lines()
		if !slices.IsSorted(lines) || len(slices.Compact(slices.Clone(lines))) != len(lines) || slices.Contains(lines, 0) {
			t.Errorf("shape %04b: lines %v are not sorted, distinct and non-zero", k, lines)
		}
		for _, l := range []uint64{1, 8} { // the corrupt lines are always there
			if !slices.Contains(lines, l) {
				t.Errorf("shape %04b: lines %v lack %d", k, lines, l)
			}
		}
	}
}
