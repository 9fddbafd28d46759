package analyze

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// BenchmarkNodeReplay streams one decode node's lines through the
// allocator replay, as replayNode does, at SGLang's default page size (1
// token: one page, and one growth operation, per token) and at the
// simulator's (64). The node is one rank of a 600k-token pool with about
// a hundred requests in flight, prompts of a few thousand tokens and
// outputs of a few hundred; one request in a hundred is a victim asked
// about, one in six an abort candidate.
func BenchmarkNodeReplay(b *testing.B) {
	for _, ps := range []int{64, 1} {
		b.Run(fmt.Sprintf("page_size=%d", ps), func(b *testing.B) {
			const n = 4000
			d, lines, ask := benchNode(n, ps)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				nr := newNodeReplay(d, "decode-0", map[uint64]bool{}, ask)
				for _, e := range lines {
					if err := nr.line(e); err != nil {
						b.Fatal(err)
					}
				}
				if ans := nr.finish(); len(ans.lineage) == 0 || len(ans.held) == 0 {
					b.Fatalf("the replay answered %d victims and %d candidates: it replayed nothing asked",
						len(ans.lineage), len(ans.held))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/request")
		})
	}
}

// benchNode is BenchmarkNodeReplay's node: n requests, nanosecond lines.
func benchNode(n, ps int) (*Dataset, []*EngineEvent, *replayAsk) {
	rng := rand.New(rand.NewSource(1))
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	const pool = 600_000
	boot := &domain.Boot{Node: "decode-0", Role: "decode", At: t0.Add(-time.Hour), PageSize: uint64(ps),
		MaxTotalTokens: pool, DPSize: 1, Version: "0.5.2", Mode: "decode"}
	// A request every 150 ms for about 15 s each: a hundred in flight.
	span := time.Duration(n) * 150 * time.Millisecond
	d := &Dataset{Window: Window{From: t0, To: t0.Add(span)}, Cfg: DefaultConfig(),
		Boots: domain.NewBoots([]*domain.Boot{boot})}
	ask := &replayAsk{writers: map[uint64]bool{}, of: map[uint64]bool{}}
	var lines []*EngineEvent
	for i := range n {
		room := uint64(1_000_000 + i)
		rid := fmt.Sprintf("%032x", room)
		prompt := min(int(math.Exp(7.5+0.8*rng.NormFloat64())), 30_000) + 1
		completion := 1 + rng.Intn(600)
		recv := t0.Add(time.Duration(i)*150*time.Millisecond + time.Duration(rng.Int63n(int64(100*time.Millisecond))))
		fin := recv.Add(time.Duration(completion) * 25 * time.Millisecond)
		finish := "stop"
		if rng.Intn(50) == 0 {
			finish, completion = "abort", 0
			ask.of[room] = true
		}
		lines = append(lines,
			&EngineEvent{Event: "received", RID: rid, Room: room, TS: recv, Prompt: uint64(prompt)},
			&EngineEvent{Event: "finished", RID: rid, Room: room, TS: fin, Prompt: uint64(prompt),
				Completion: uint64(completion), FinishType: finish})
		if rng.Intn(100) == 0 {
			ask.writers[room] = true
		}
		if rng.Intn(6) == 0 {
			ask.holders = append(ask.holders, room) // rooms in order: a sorted list
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].TS.Before(lines[j].TS) })
	for i, e := range lines {
		e.Node, e.Role, e.Line = "decode-0", "decode", uint64(i+1)
	}
	return d, lines, ask
}
