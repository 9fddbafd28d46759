package analyze

import (
	"fmt"
	"testing"
)

// BenchmarkCoreKeys builds the keys of one default slice's core span
// (DefaultSliceRequests requests, each a gateway response and Receive and
// Finish lines on a prefill and a decode node), as loadLinked does before
// it filters the margins.
func BenchmarkCoreKeys(b *testing.B) {
	const n = DefaultSliceRequests
	var gw []*GatewayResponse
	var engine []*EngineEvent
	for i := range n {
		room := uint64(1_000_000 + i)
		prid, drid := fmt.Sprintf("%032x", 2*room), fmt.Sprintf("%032x", 2*room+1)
		gw = append(gw, &GatewayResponse{Room: room, PrefillRID: prid, DecodeRID: drid})
		for _, rid := range []string{prid, prid, drid, drid} {
			engine = append(engine, &EngineEvent{Room: room, RID: rid})
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		keys := newCoreKeys(n)
		for _, g := range gw {
			keys.gateway(g)
		}
		for _, e := range engine {
			keys.engine(e)
		}
		if !keys.names(0, gw[n-1].DecodeRID) || keys.names(7, "x") {
			b.Fatal("the keys do not name the core's requests")
		}
	}
}
