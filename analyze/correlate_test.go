package analyze

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Requests under one bootstrap room (a router deriving rooms from a
// request id the client left unset gives every concurrent request the
// same one) each link their own lines, by the rids the gateway logged; a
// request whose gateway rid is not the one its node logged (version
// drift) still links by its room alone.
func TestCorrelateSharedRoom(t *testing.T) {
	shared := func(int) uint64 { return 42 }
	for _, tc := range []struct {
		name string
		n    int
		room func(i int) uint64
		// edit changes the input before linking.
		edit func(gw []*GatewayResponse, engine []*EngineEvent) []*TransferEvent
		// want is request i's linked lines, nil for its own five.
		want func(i int) []uint64
	}{
		// Requests 0 and 8 share their nodes: 36 lines, under domain.RoomLines.
		{name: "requests under one room on the same nodes", n: 9, room: shared},
		{name: "more requests under one room than a room's lines", n: 3 * domain.RoomLines, room: shared},
		{name: "a transfer failure of one of many requests under one room", n: 3 * domain.RoomLines, room: shared,
			edit: func(gw []*GatewayResponse, _ []*EngineEvent) []*TransferEvent {
				return []*TransferEvent{{Node: "decode-7", Event: "decode_transfer_failed", RID: gw[7].DecodeRID, Room: 42, Line: 1 << 40}}
			},
			want: func(i int) []uint64 {
				if i == 7 {
					return append(ownLines(i), 1<<40)
				}
				return nil
			}},
		{name: "many requests under one room, no rids logged", n: 3 * domain.RoomLines, room: shared,
			edit: func(gw []*GatewayResponse, _ []*EngineEvent) []*TransferEvent {
				for _, g := range gw {
					g.PrefillRID, g.DecodeRID = "", ""
				}
				return nil
			},
			want: func(i int) []uint64 { return []uint64{uint64(5*i + 5)} }},
		// Requests 0 and 8 share their nodes and name no rid: neither can
		// tell its lines from the other's, and taking the first would give
		// both request 0's; the others have the room to themselves there.
		{name: "requests under one room on the same nodes, no rids logged", n: 9, room: shared,
			edit: func(gw []*GatewayResponse, _ []*EngineEvent) []*TransferEvent {
				for _, g := range gw {
					g.PrefillRID, g.DecodeRID = "", ""
				}
				return nil
			},
			want: func(i int) []uint64 {
				if i%8 == 0 {
					return []uint64{uint64(5*i + 5)}
				}
				return nil
			}},
		{name: "gateway rids other than the nodes' link by room", n: 3, room: func(i int) uint64 { return uint64(100 + i) },
			edit: func(gw []*GatewayResponse, _ []*EngineEvent) []*TransferEvent {
				for _, g := range gw {
					g.PrefillRID, g.DecodeRID = "router-"+g.PrefillRID, "router-"+g.DecodeRID
				}
				return nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, engine, nodes := correlateInput(tc.n, tc.room)
			var xfer []*TransferEvent
			if tc.edit != nil {
				xfer = tc.edit(gw, engine)
			}
			w := Window{From: gw[0].TS, To: gw[0].TS.Add(time.Hour)}
			facts := correlate(w, domain.NewBoots(nil), nodes, gw, engine, xfer, DefaultConfig().sliceContext())
			if len(facts) != tc.n {
				t.Fatalf("%d facts, want %d", len(facts), tc.n)
			}
			for i, f := range facts {
				want := ownLines(i)
				if tc.want != nil && tc.want(i) != nil {
					want = tc.want(i)
				}
				if f.Key != fmt.Sprintf("req-%d", i) || !slices.Equal(f.Lines(), want) {
					t.Fatalf("request %s links %s lines %v, want req-%d lines %v", f.Key, f.Links(), f.Lines(), i, want)
				}
			}
		})
	}
}

// ownLines is request i's four engine lines and its gateway line in
// correlateInput.
func ownLines(i int) []uint64 {
	return []uint64{uint64(5*i + 1), uint64(5*i + 2), uint64(5*i + 3), uint64(5*i + 4), uint64(5*i + 5)}
}

// A request id reused for another request (a client-supplied id) keys
// each response by id and line, so each stays its own request; the same
// response logged twice stays one key; a reuse farther apart than the
// slices' context is not seen (each slice decides as the whole window).
func TestCorrelateReusedRequestIDs(t *testing.T) {
	reuse := DefaultConfig().sliceContext()
	for _, tc := range []struct {
		name string
		n    int
		edit func(gw []*GatewayResponse) []*GatewayResponse
		want func(gw []*GatewayResponse) []string // each fact's key, in order
	}{
		{name: "an id reused for another request", n: 3,
			edit: func(gw []*GatewayResponse) []*GatewayResponse { gw[1].RequestID = "req-0"; return gw },
			want: func(gw []*GatewayResponse) []string {
				return []string{"req-0#" + itoa(gw[0].Line), "req-0#" + itoa(gw[1].Line), "req-2"}
			}},
		{name: "one id on every response", n: 3 * domain.RoomLines,
			edit: func(gw []*GatewayResponse) []*GatewayResponse {
				for _, g := range gw {
					g.RequestID = "-"
				}
				return gw
			},
			want: func(gw []*GatewayResponse) []string {
				var k []string
				for _, g := range gw {
					k = append(k, "-#"+itoa(g.Line))
				}
				return k
			}},
		{name: "a response logged twice", n: 2,
			edit: func(gw []*GatewayResponse) []*GatewayResponse {
				again := *gw[0]
				again.Line = 1 << 40
				return append(gw, &again)
			},
			want: func([]*GatewayResponse) []string { return []string{"req-0", "req-0", "req-1"} }},
		{name: "an id reused after the slices' context", n: 2,
			edit: func(gw []*GatewayResponse) []*GatewayResponse {
				gw[1].RequestID, gw[1].TS = "req-0", gw[0].TS.Add(reuse+time.Second)
				return gw
			},
			want: func([]*GatewayResponse) []string { return []string{"req-0", "req-0"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, engine, nodes := correlateInput(tc.n, func(i int) uint64 { return uint64(100 + i) })
			gw = tc.edit(gw)
			w := Window{From: gw[0].TS, To: gw[0].TS.Add(time.Hour)}
			facts := correlate(w, domain.NewBoots(nil), nodes, gw, engine, nil, reuse)
			var keys []string
			for _, f := range facts {
				keys = append(keys, f.Key)
				if f.Decode == nil || f.Decode.RID != f.GW.DecodeRID {
					t.Errorf("%s (line %d) links decode %+v", f.Key, f.GW.Line, f.Decode)
				}
			}
			if want := tc.want(gw); !slices.Equal(keys, want) {
				t.Fatalf("keys %v, want %v", keys, want)
			}
		})
	}
}
