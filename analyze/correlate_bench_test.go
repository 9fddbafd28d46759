package analyze

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// BenchmarkCorrelate links one slice's worth of requests (20,000, each a
// gateway response and Receive and Finish lines on a prefill and a decode
// node of 8 each), as a slice of an analysis or of ingest's linking does.
func BenchmarkCorrelate(b *testing.B) {
	benchCorrelate(b, func(i int) uint64 { return uint64(1_000_000 + i) })
}

// BenchmarkCorrelateSharedRoom links the same requests all under one
// bootstrap room, as a router that derives rooms from an unset request id
// logs them: each is linked by its rids, in about the time of distinct
// rooms (it took n² steps before).
func BenchmarkCorrelateSharedRoom(b *testing.B) {
	benchCorrelate(b, func(int) uint64 { return 42 })
}

func benchCorrelate(b *testing.B, room func(i int) uint64) {
	const n = 20_000
	gw, engine, nodes := correlateInput(n, room)
	w := Window{From: gw[0].TS, To: gw[0].TS.Add(time.Hour)}
	boots := domain.NewBoots(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if facts := correlate(w, boots, nodes, gw, engine, nil, DefaultConfig().sliceContext()); len(facts) != n || facts[n-1].Decode == nil || facts[n-1].Decode.RID != gw[n-1].DecodeRID {
			b.Fatalf("%d facts, last %+v", len(facts), facts[n-1])
		}
	}
}

// correlateInput is n requests, each a gateway response (with its rids)
// and Receive and Finish lines on a prefill and a decode node of 8 each,
// request i under bootstrap room room(i).
func correlateInput(n int, room func(i int) uint64) ([]*GatewayResponse, []*EngineEvent, nodeMap) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	nodes := nodeMap{byHost: map[string]string{}}
	for i := 0; i < 8; i++ {
		nodes.byHost[fmt.Sprintf("10.0.0.%d", i)] = fmt.Sprintf("prefill-%d", i)
		nodes.byHost[fmt.Sprintf("10.0.1.%d", i)] = fmt.Sprintf("decode-%d", i)
	}
	var gw []*GatewayResponse
	var engine []*EngineEvent
	for i := 0; i < n; i++ {
		ts, room := t0.Add(time.Duration(i)*time.Millisecond), room(i)
		p, d := fmt.Sprintf("prefill-%d", i%8), fmt.Sprintf("decode-%d", i%8)
		prid, drid := fmt.Sprintf("%032x", 2*i+2), fmt.Sprintf("%032x", 2*i+3)
		gw = append(gw, &GatewayResponse{TS: ts, RequestID: fmt.Sprintf("req-%d", i), Tenant: "acme", Status: 200,
			Prompt: 812, Completion: 97, Room: room, PrefillEP: fmt.Sprintf("http://10.0.0.%d:30000", i%8),
			DecodeEP: fmt.Sprintf("http://10.0.1.%d:30000", i%8), PrefillRID: prid, DecodeRID: drid, Line: uint64(5*i + 5)})
		for k, e := range []struct {
			node, role, event, rid string
		}{{p, "prefill", "received", prid}, {p, "prefill", "finished", prid}, {d, "decode", "received", drid}, {d, "decode", "finished", drid}} {
			engine = append(engine, &EngineEvent{TS: ts.Add(time.Duration(k) * time.Millisecond), Node: e.node, Role: e.role,
				Event: e.event, RID: e.rid, Room: room, Prompt: 812, Line: uint64(5*i + k + 1)})
		}
	}
	return gw, engine, nodes
}
