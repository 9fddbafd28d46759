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

// BenchmarkAffectedRowsWide reads a notification list shaped like scale
// 100's (48 tenants, each row naming tens of thousands of requests,
// findings and evidence lines, saved three times as three analyses of
// the same data do) with whole blocks, as AffectedRows does, and with the server's
// adaptive block size, the baseline. On 18.16 the adaptive read decodes a
// granule's arrays again for every row or two it returns.
func BenchmarkAffectedRowsWide(b *testing.B) {
	ctx := context.Background()
	s := testdb.New(b)
	created := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]domain.AffectedRow, 48)
	for i := range rows {
		// Skewed as there: the widest rows name 100,000-150,000 requests.
		// (At a third of this size both reads take about 3 s.)
		n := 15_000 + 135_000/(i+1)
		r := domain.AffectedRow{Tenant: fmt.Sprintf("tenant-%03d", i), Role: domain.Exposed, Requests: n,
			First: created, Last: created, Tier: domain.Confirmed}
		for k := range n {
			r.RequestKeys = append(r.RequestKeys, fmt.Sprintf("req-%03d-%036d", i, k))
			r.FindingIDs = append(r.FindingIDs, fmt.Sprintf("%024x", i*1_000_000+k))
			r.Evidence = append(r.Evidence, uint64(i*1_000_000+k), uint64(i*1_000_000+k+500_000))
		}
		rows[i] = r
	}
	for save := range 3 {
		if err := s.SaveAffected(ctx, "wide", "", created.Add(time.Duration(save)*time.Second), rows); err != nil {
			b.Fatal(err)
		}
	}
	// Merged into one part, as the server does in time: the saves' rows
	// then share one granule, the case that is slow.
	if err := s.Exec(ctx, "OPTIMIZE TABLE affected FINAL"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		read func(context.Context, string) (string, []domain.AffectedRow, error)
	}{{"whole-blocks", s.AffectedRows}, {"adaptive-blocks", s.AffectedRowsAdaptiveBlocks}} {
		b.Run(c.name, func(b *testing.B) {
			// The baseline outlives the 60 s read timeout at full size: a
			// deadline replaces it (chstore.Store.Stream's reason).
			ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			for i := 0; i < b.N; i++ {
				_, got, err := c.read(ctx, "wide")
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != len(rows) {
					b.Fatalf("read %d rows", len(got))
				}
			}
		})
	}
}
