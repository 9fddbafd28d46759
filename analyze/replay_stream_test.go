package analyze

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// TestStreamedReplayEqualsWholeLane: the streamed replay, flushing after
// every Finish and compacting its request records as often as it may,
// answers exactly as one sorted pass over each whole lane (a single flush
// at the end, no compaction) — on random nodes with queueing, aborts,
// requests without a Finish, both allocator kinds and second-granular
// lines.
func TestStreamedReplayEqualsWholeLane(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		coarse  bool
	}{
		{"need_sort, ns lines", "0.5.2", false},
		{"need_sort, whole seconds", "0.5.2", true},
		{"front of free list, ns lines", "0.4.5", false},
		{"front of free list, whole seconds", "0.4.5", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := 0
			for seed := int64(1); seed <= 5; seed++ {
				d, lines, ask := replayFixture(seed, tc.version, tc.coarse)
				whole := streamNode(t, d, lines, ask, 1<<30, 1<<30)
				streamed := streamNode(t, d, lines, ask, 1, 1)
				held := 0
				for _, hs := range whole.held {
					held += len(hs)
				}
				if len(whole.lineage) == 0 || held == 0 {
					t.Fatalf("seed %d: the whole-lane replay answered %d victims and %d holders; the comparison proves nothing",
						seed, len(whole.lineage), held)
				}
				if !reflect.DeepEqual(whole.held, streamed.held) {
					t.Fatalf("seed %d: streamed holders %v, whole lane %v", seed, streamed.held, whole.held)
				}
				if !reflect.DeepEqual(whole.lineage, streamed.lineage) {
					for room, w := range whole.lineage {
						if s := streamed.lineage[room]; !reflect.DeepEqual(w, s) {
							t.Fatalf("seed %d, room %d: streamed %+v, whole lane %+v", seed, room, s, w)
						}
					}
					t.Fatalf("seed %d: streamed answered %d rooms, whole lane %d", seed, len(streamed.lineage), len(whole.lineage))
				}
				// Into a lineage set, each victim spilled as soon as it is
				// final and read back with its lane's note: the same.
				set := newLineageSet()
				defer set.close()
				sunk, _ := streamNodeInto(t, d, lines, ask, 1, 1, set)
				if !tc.coarse {
					// With every request finished (a request in flight
					// holds the lane's operations back), a lane into a set
					// holds none of its victims once they are final.
					done := finishedOnly(lines)
					spare := newLineageSet()
					_, kept := streamNodeInto(t, d, done, ask, 1, 1, spare)
					_, before := streamNodeInto(t, d, done, ask, 1, 1, nil)
					spare.close()
					if kept != 0 || before < 10 {
						t.Fatalf("seed %d: the lanes held %d victims when the lines ended, %d without a set; want none and at least 10",
							seed, kept, before)
					}
				}
				if len(sunk.lineage) != 0 || set.len() != len(whole.lineage) || !reflect.DeepEqual(sunk.held, whole.held) {
					t.Fatalf("seed %d: into a set, %d rooms left in the answer and %d in the set; want none and %d, and the same holders",
						seed, len(sunk.lineage), set.len(), len(whole.lineage))
				}
				for room, w := range whole.lineage {
					got, err := set.get(room)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(normalVictim(w), normalVictim(got)) {
						t.Fatalf("seed %d, room %d: from the set %+v, whole lane %+v", seed, room, got, w)
					}
					if len(w.Uncertain) > 0 {
						notes++
					}
				}
			}
			if notes == 0 {
				t.Error("no victim had a note: the lane's notes were not compared")
			}
		})
	}
}

// finishedOnly is lines without the requests that have no Finish line.
func finishedOnly(lines []*EngineEvent) []*EngineEvent {
	fin := map[string]bool{}
	for _, e := range lines {
		if e.Event == "finished" {
			fin[e.RID] = true
		}
	}
	var out []*EngineEvent
	for _, e := range lines {
		if fin[e.RID] {
			out = append(out, e)
		}
	}
	return out
}

// normalVictim is vr with empty maps and lists as nil, as a spill gives
// them back.
func normalVictim(vr *VictimReplay) VictimReplay {
	v := *vr
	for _, m := range []*map[uint64]*SourcePages{&v.Likely, &v.Possible} {
		if len(*m) == 0 {
			*m = nil
		}
	}
	if len(v.Uncertain) == 0 {
		v.Uncertain = nil
	}
	if len(v.Lines) == 0 {
		v.Lines = nil
	}
	return v
}

// streamNode replays one node's lines with the given batching limits.
func streamNode(t *testing.T, d *Dataset, lines []*EngineEvent, ask *replayAsk, flush, compact int) replayAnswer {
	t.Helper()
	ans, _ := streamNodeInto(t, d, lines, ask, flush, compact, nil)
	return ans
}

// streamNodeInto is streamNode with the victims' lineage going into set,
// as node 0's, when set is not nil. kept is how many victims the lanes
// replayed in one order held when the lines ended.
func streamNodeInto(t *testing.T, d *Dataset, lines []*EngineEvent, ask *replayAsk, flush, compact int, set *lineageSet) (
	ans replayAnswer, kept int) {
	t.Helper()
	defer func(f, c int) { flushMin, compactMin = f, c }(flushMin, compactMin)
	flushMin, compactMin = flush, compact
	n := newNodeReplay(d, "decode-0", map[uint64]bool{}, ask)
	if set != nil {
		n.sink = &laneSink{set: set, node: 0}
	}
	for _, e := range lines {
		if err := n.line(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, ls := range n.lanes {
		if ls != nil && len(ls.runs) == 1 {
			kept += len(ls.runs[0].res)
		}
	}
	return n.finish(), kept
}

// replayFixture is a random decode node: two DP ranks of a small pool, 600
// requests over twenty minutes, some aborted, some without a Finish; asked
// about the writers of one request in eight and, for one in six, whether
// an aborted request held its pages.
func replayFixture(seed int64, version string, coarse bool) (*Dataset, []*EngineEvent, *replayAsk) {
	rng := rand.New(rand.NewSource(seed))
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	boot := &domain.Boot{Node: "decode-0", Role: "decode", At: t0.Add(-time.Hour), PageSize: 4, MaxTotalTokens: 240,
		DPSize: 2, Version: version, Mode: "decode"}
	d := &Dataset{Window: Window{From: t0, To: t0.Add(20 * time.Minute)}, Cfg: DefaultConfig(),
		Boots: domain.NewBoots([]*domain.Boot{boot})}
	var lines []*EngineEvent
	ask := &replayAsk{writers: map[uint64]bool{}, of: map[uint64]bool{}}
	for i := 0; i < 600; i++ {
		room := uint64(1000 + i)
		rid := fmt.Sprintf("r%d", i)
		recv := t0.Add(time.Duration(rng.Int63n(int64(20 * time.Minute))))
		fin := recv.Add(time.Duration(rng.Int63n(int64(40 * time.Second))))
		if coarse {
			recv, fin = recv.Truncate(time.Second), fin.Truncate(time.Second)
		}
		prompt := 4 + rng.Intn(60)
		completion := rng.Intn(20)
		finish := "stop"
		if rng.Intn(10) == 0 {
			finish, completion = "abort", 0
			ask.of[room] = true
		}
		lines = append(lines, &EngineEvent{Node: "decode-0", Role: "decode", Event: "received", RID: rid, Room: room,
			TS: recv, Prompt: uint64(prompt)})
		if rng.Intn(25) != 0 { // some never finish
			lines = append(lines, &EngineEvent{Node: "decode-0", Role: "decode", Event: "finished", RID: rid, Room: room,
				TS: fin, Prompt: uint64(prompt), Completion: uint64(completion), FinishType: finish})
		}
		if rng.Intn(8) == 0 {
			ask.writers[room] = true
		}
		if rng.Intn(6) == 0 {
			ask.holders = append(ask.holders, room) // rooms come in order: a sorted list
		}
	}
	// The store's order: time, then line id (file order).
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].TS.Before(lines[j].TS) })
	for i, e := range lines {
		e.Line = uint64(i + 1)
	}
	return d, lines, ask
}

// TestLaneRecordsDoNotGrowWithTheWindow: a lane keeps the records of the
// requests its pages, queue and flights still name, compacting the rest
// away, so ten times the window at the same traffic holds about as many.
// (Compaction waited for four records a page of the pool until session
// 37: at incident scale 100, 196,608 records a lane, nearly all dead.)
func TestLaneRecordsDoNotGrowWithTheWindow(t *testing.T) {
	defer func(f, c int) { flushMin, compactMin = f, c }(flushMin, compactMin)
	flushMin, compactMin = 64, 256
	peak := func(n int) int {
		rng := rand.New(rand.NewSource(7))
		t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
		boot := &domain.Boot{Node: "decode-0", Role: "decode", At: t0.Add(-time.Hour), PageSize: 4, MaxTotalTokens: 4096,
			DPSize: 1, Version: "0.5.2", Mode: "decode"}
		d := &Dataset{Window: Window{From: t0, To: t0.Add(time.Duration(n) * 2 * time.Second)}, Cfg: DefaultConfig(),
			Boots: domain.NewBoots([]*domain.Boot{boot})}
		var lines []*EngineEvent
		for i := range n {
			recv := t0.Add(time.Duration(i)*2*time.Second + time.Duration(rng.Int63n(int64(time.Second))))
			fin := recv.Add(time.Duration(rng.Int63n(int64(40 * time.Second))))
			prompt, completion := 8+rng.Intn(32), rng.Intn(20)
			rid := fmt.Sprint("r", i)
			lines = append(lines,
				&EngineEvent{Event: "received", RID: rid, Room: uint64(1000 + i), TS: recv, Prompt: uint64(prompt)},
				&EngineEvent{Event: "finished", RID: rid, Room: uint64(1000 + i), TS: fin, Prompt: uint64(prompt),
					Completion: uint64(completion), FinishType: "stop"})
		}
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].TS.Before(lines[j].TS) })
		ask := &replayAsk{writers: map[uint64]bool{}, of: map[uint64]bool{}}
		nr := newNodeReplay(d, "decode-0", map[uint64]bool{}, ask)
		most := 0
		for i, e := range lines {
			e.Node, e.Role, e.Line = "decode-0", "decode", uint64(i+1)
			if err := nr.line(e); err != nil {
				t.Fatal(err)
			}
			for _, ls := range nr.lanes {
				most = max(most, len(ls.reqs))
			}
		}
		nr.finish()
		return most
	}
	small, large := peak(2_000), peak(20_000)
	if large > small+small/4 || large >= 2_000 {
		t.Fatalf("a lane held at most %d request records over 2,000 requests and %d over 20,000: it grows with the window",
			small, large)
	}
	t.Logf("a lane's records at most: %d over 2,000 requests, %d over 20,000", small, large)
}

// TestLanesOfEarlierBootsRetire: a node restarted three times in the
// window keeps only its current boot's lanes alive (a lane holds its
// pool's pages, 50 MB a rank at a page size of one token), and answers
// exactly as when every boot's lanes are held to the node's end.
func TestLanesOfEarlierBootsRetire(t *testing.T) {
	d, lines, ask := replayFixture(3, "0.5.2", false)
	t0 := d.Window.From
	var boots []*domain.Boot
	for i := range 4 {
		boots = append(boots, &domain.Boot{Node: "decode-0", Role: "decode", At: t0.Add(time.Duration(i*5)*time.Minute - time.Second),
			PageSize: 4, MaxTotalTokens: 240, DPSize: 2, Version: "0.5.2", Mode: "decode"})
	}
	d.Boots = domain.NewBoots(boots)
	// A restart ends the requests in flight: no Finish of a boot's request
	// comes after the next boot's start.
	recvBoot := map[string]*domain.Boot{}
	kept := lines[:0]
	for _, e := range lines {
		b := d.Boots.At("decode-0", e.TS)
		if e.Event == "received" {
			recvBoot[e.RID] = b
		} else if recvBoot[e.RID] != b {
			continue
		}
		kept = append(kept, e)
	}
	lines = kept
	run := func(retire bool) (replayAnswer, int) {
		defer func(r bool) { retireLanes = r }(retireLanes)
		retireLanes = retire
		n := newNodeReplay(d, "decode-0", map[uint64]bool{}, ask)
		for _, e := range lines {
			if err := n.line(e); err != nil {
				t.Fatal(err)
			}
		}
		alive := 0
		for _, ls := range n.lanes {
			if ls != nil && !ls.done {
				alive++
			}
		}
		return n.finish(), alive
	}
	held, heldAlive := run(false)
	retired, alive := run(true)
	if heldAlive != 8 || alive > 2 {
		t.Fatalf("lanes alive at the last line: %d retiring, %d holding; want at most 2 (one boot's ranks) and 8", alive, heldAlive)
	}
	if len(held.lineage) == 0 || len(held.held) == 0 {
		t.Fatalf("the replay answered %d victims and %d candidates: the comparison proves nothing", len(held.lineage), len(held.held))
	}
	if !reflect.DeepEqual(held.lineage, retired.lineage) || !reflect.DeepEqual(held.held, retired.held) {
		t.Fatal("retiring a restarted boot's lanes changed the node's answer")
	}
}

// With deferred KV release on, decode holds an aborted request's pages
// until the release (decode.py resolve_deferred_releases at upstream
// d315eb72, sglang #35049; §c4); when it timed out, the replay frees them
// at the timeout, not at the request's Finish. The pages each request gets
// follow PagedTokenToKVPoolAllocator with need_sort (docs/analyzers.md,
// "Exposure"; TestReplayAllocatesAsSGLang transcribes it).
// On a rank of 8 pages (SGLang 0.5.2, need_sort): A takes pages 1-4 and is
// aborted at 2 s; B (received at 5 s) and C (at 40 s) need 4 pages each.
// Freed at the abort, A's pages go to B and C gets 5-8; held until the
// release at 32 s, B gets 5-8 and C gets A's.
func TestReplayHoldsPagesUntilATimedOutRelease(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	boot := &domain.Boot{Node: "decode-0", Role: "decode", At: t0.Add(-time.Hour), PageSize: 4, MaxTotalTokens: 32,
		DPSize: 1, Version: "0.5.2", Mode: "decode"}
	d := &Dataset{Window: Window{From: t0, To: t0.Add(5 * time.Minute)}, Cfg: DefaultConfig(),
		Boots: domain.NewBoots([]*domain.Boot{boot})}
	const a, b, c = 100, 200, 300
	line := func(event string, room uint64, at time.Duration, finish string) *EngineEvent {
		return &EngineEvent{Node: "decode-0", Role: "decode", Event: event, RID: fmt.Sprint("r", room), Room: room,
			TS: t0.Add(at), Prompt: 16, FinishType: finish}
	}
	lines := []*EngineEvent{
		line("received", a, 0, ""), line("finished", a, 2*time.Second, "abort"),
		line("received", b, 5*time.Second, ""), line("finished", b, 60*time.Second, "stop"),
		line("received", c, 40*time.Second, ""), line("finished", c, 70*time.Second, "stop"),
	}
	for i, e := range lines {
		e.Line = uint64(i + 1)
	}
	holders := func(released map[uint64]time.Time) map[uint64][]uint64 {
		ask := &replayAsk{writers: map[uint64]bool{}, of: map[uint64]bool{a: true}, holders: rooms{b, c}}
		n := newNodeReplay(d, "decode-0", map[uint64]bool{}, ask)
		n.released = released
		for _, e := range lines {
			if err := n.line(e); err != nil {
				t.Fatal(err)
			}
		}
		return n.finish().held
	}
	freedAtAbort := holders(nil)
	if !slices.Contains(freedAtAbort[b], a) || slices.Contains(freedAtAbort[c], a) {
		t.Fatalf("pages freed at the abort: B should hold A's and C not: %v", freedAtAbort)
	}
	held := holders(map[uint64]time.Time{a: t0.Add(32 * time.Second)})
	if slices.Contains(held[b], a) {
		t.Errorf("B was handed A's pages while the deferred release held them: %v", held)
	}
	if !slices.Contains(held[c], a) {
		t.Errorf("C, after the release, was not handed A's pages: %v", held)
	}
}
