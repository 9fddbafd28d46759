package domain

import (
	"testing"
	"time"
)

// BenchmarkRequestLinesAndLinks: the lines and the links of a request
// linked across gateway, prefill, transfer and decode, as request_facts
// rows are built for every request of an analysis.
func BenchmarkRequestLinesAndLinks(b *testing.B) {
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	r := &Request{TS: t0, GW: &GatewayResponse{Line: 90},
		Prefill:  &Side{Recv: &EngineEvent{Line: 30}, Fin: &EngineEvent{Line: 40}},
		Decode:   &Side{Recv: &EngineEvent{Line: 50}, Fin: &EngineEvent{Line: 70}},
		Transfer: []*TransferEvent{{Line: 60}, {Line: 60}}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n += len(r.Lines()) + len(r.Links())
	}
	if n == 0 {
		b.Fatal("no lines")
	}
}
