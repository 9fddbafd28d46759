package analyze

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// BenchmarkAbortCase: abort cases of 100 requests around each abort, as slices build
// them; held-B/cand is the heap they would keep per candidate, held until
// the window's end, once the garbage of building them is collected, and
// spilled-B/cand the bytes the pass writes to its spill file instead.
func BenchmarkAbortCase(b *testing.B) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	boot := &domain.Boot{MaxReqInputLen: 4090}
	var around []*Fact
	for i := 0; i < 100; i++ {
		key := fmt.Sprintf("req-%08d-5f0c2a1e9b7d", i)
		ts := t0.Add(time.Duration(i) * 300 * time.Millisecond)
		l := uint64(i * 8)
		// Half of them are short: those received well before the abort
		// ended before it and are no candidates, as around a real abort.
		dur := time.Minute
		if i%2 == 0 {
			dur = time.Second
		}
		around = append(around, &Fact{Key: key, TS: ts, Tenant: fmt.Sprintf("tenant-%03d", i%40), Model: "m", Room: uint64(i) + 1<<40,
			GW:      &domain.GatewayResponse{RequestID: key, Status: 200, Prompt: 5000, Completion: 300, TTFTMs: 90, Line: l + 1, TS: ts},
			Prefill: &domain.Side{Node: "prefill-1", DPRank: 2, RID: "p" + key, Boot: boot, Recv: &domain.EngineEvent{Line: l + 2, TS: ts}},
			Decode: &domain.Side{Node: "decode-3", DPRank: 1, RID: "d" + key, Recv: &domain.EngineEvent{Line: l + 3, TS: ts},
				Fin: &domain.EngineEvent{Line: l + 4, TS: ts.Add(dur), Prompt: 5000, Completion: 300, FinishType: "stop"}},
			Transfer: []*domain.TransferEvent{{Event: "transfer_done", Line: l + 5, TS: ts}}})
	}
	src := around[0]
	abort := &TransferEvent{Node: "decode-3", Role: "decode", DPRank: 1, Event: "decode_transfer_failed", Room: src.Room, TS: t0.Add(10 * time.Second)}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make([]abortCase, 0, b.N)
	cands, spilled := 0, 0
	var enc []byte
	for i := 0; i < b.N; i++ {
		c := newAbortCase(abort, src, 1, around)
		cands += len(c.cands)
		enc = encodeAbortCase(enc[:0], &c)
		spilled += len(enc)
		held = append(held, c)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if cands == 0 {
		b.Fatal("no candidates")
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(cands), "held-B/cand")
	// What the pass keeps of them since session 38: the encoded case, on
	// disk (abortSpill).
	b.ReportMetric(float64(spilled)/float64(cands), "spilled-B/cand")
	runtime.KeepAlive(held)
	runtime.KeepAlive(around)
}
