package chstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// benchFacts are n linked requests shaped like the simulator's: gateway,
// prefill and decode sides, three lines each.
func benchFacts(n int) []*domain.Request {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	out := make([]*domain.Request, n)
	for i := range out {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		room := uint64(1_000_000 + i)
		recv := func(node string, line uint64) *domain.EngineEvent {
			return &domain.EngineEvent{TS: ts, Node: node, Event: "received", RID: fmt.Sprintf("%032x", room), Room: room, Prompt: 812, Line: line}
		}
		fin := &domain.EngineEvent{TS: ts.Add(time.Second), Node: "decode-1", Event: "finished", Room: room, Prompt: 812, Completion: 97, FinishType: "length", Line: uint64(3*i + 2)}
		out[i] = &domain.Request{
			Key: fmt.Sprintf("room:%d", room), TS: ts, Tenant: fmt.Sprintf("tenant-%03d", i%200), Model: "model-a", Room: room,
			GW: &domain.GatewayResponse{TS: ts, RequestID: fmt.Sprintf("req-%d", i), Status: 200, Prompt: 812, Completion: 97,
				TTFTMs: 180, DurationMs: 2400, Room: room, Line: uint64(3 * i)},
			Prefill: &domain.Side{Node: "prefill-0", RID: fmt.Sprintf("%032x", room), DPRank: 0, Recv: recv("prefill-0", uint64(3*i+1))},
			Decode:  &domain.Side{Node: "decode-1", RID: fmt.Sprintf("%032x", room), DPRank: 1, Recv: recv("decode-1", uint64(3*i+1)), Fin: fin},
		}
	}
	return out
}

// BenchmarkSaveRequestFacts writes 50,000 request_facts rows (one
// analysis insert) to a real server: the client's cost of a linked
// request, which the analysis pays for every request of the window.
func BenchmarkSaveRequestFacts(b *testing.B) {
	ctx := context.Background()
	s := testdb.New(b)
	facts := benchFacts(50_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.SaveRequestFacts(ctx, facts, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(facts)), "ns/fact")
}

// BenchmarkSaveFindingKeys writes the lookup keys of 20,000 findings (one
// findings insert of abort_reuse's leads at scale 100: the finding, its
// request, its room and one foreign request each, 80,000 rows) to a real
// server through SaveFindingForeign's and SaveFindings' writer.
func BenchmarkSaveFindingKeys(b *testing.B) {
	ctx := context.Background()
	s := testdb.New(b)
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	fs := make([]domain.Finding, 20_000)
	for i := range fs {
		fs[i] = domain.Finding{ID: fmt.Sprintf("%024x", i), RunID: "5f0c8e2a9d1b4c7e3a6f8d20", Analyzer: "abort_reuse",
			TS: t0.Add(time.Duration(i) * time.Millisecond), GatewayRequestID: fmt.Sprintf("req-%d", i), Room: uint64(1_000_000 + i),
			ForeignRequestKeys: []string{fmt.Sprintf("req-%d", i+1)}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := chstore.SaveFindingKeys(ctx, s, fs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*4*len(fs)), "ns/key")
}
