package analyze

import (
	"fmt"
	"math/rand"
	"reflect"
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
			for seed := int64(1); seed <= 5; seed++ {
				d, lines, want := replayFixture(seed, tc.version, tc.coarse)
				whole := streamNode(t, d, lines, want, 1<<30, 1<<30)
				streamed := streamNode(t, d, lines, want, 1, 1)
				if len(whole) == 0 {
					t.Fatalf("seed %d: the whole-lane replay answered for no victim; the comparison proves nothing", seed)
				}
				if !reflect.DeepEqual(whole, streamed) {
					for room, w := range whole {
						if s := streamed[room]; !reflect.DeepEqual(w, s) {
							t.Fatalf("seed %d, room %d: streamed %+v, whole lane %+v", seed, room, s, w)
						}
					}
					t.Fatalf("seed %d: streamed answered %d rooms, whole lane %d", seed, len(streamed), len(whole))
				}
			}
		})
	}
}

// streamNode replays one node's lines with the given batching limits.
func streamNode(t *testing.T, d *Dataset, lines []*EngineEvent, want map[uint64]bool, flush, compact int) map[uint64]*VictimReplay {
	t.Helper()
	defer func(f, c int) { flushMin, compactMin = f, c }(flushMin, compactMin)
	flushMin, compactMin = flush, compact
	n := newNodeReplay(d, "decode-0", map[uint64]bool{}, map[uint64]bool{}, want)
	for _, e := range lines {
		if err := n.line(e); err != nil {
			t.Fatal(err)
		}
	}
	return n.finish()
}

// replayFixture is a random decode node: two DP ranks of a small pool, 600
// requests over twenty minutes, some aborted, some without a Finish.
func replayFixture(seed int64, version string, coarse bool) (*Dataset, []*EngineEvent, map[uint64]bool) {
	rng := rand.New(rand.NewSource(seed))
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	boot := &domain.Boot{Node: "decode-0", Role: "decode", At: t0.Add(-time.Hour), PageSize: 4, MaxTotalTokens: 240,
		DPSize: 2, Version: version, Mode: "decode"}
	d := &Dataset{Window: Window{From: t0, To: t0.Add(20 * time.Minute)}, Cfg: DefaultConfig(),
		Boots: domain.NewBoots([]*domain.Boot{boot})}
	var lines []*EngineEvent
	want := map[uint64]bool{}
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
		}
		lines = append(lines, &EngineEvent{Node: "decode-0", Role: "decode", Event: "received", RID: rid, Room: room,
			TS: recv, Prompt: uint64(prompt)})
		if rng.Intn(25) != 0 { // some never finish
			lines = append(lines, &EngineEvent{Node: "decode-0", Role: "decode", Event: "finished", RID: rid, Room: room,
				TS: fin, Prompt: uint64(prompt), Completion: uint64(completion), FinishType: finish})
		}
		if rng.Intn(8) == 0 {
			want[room] = true
		}
	}
	// The store's order: time, then line id (file order).
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].TS.Before(lines[j].TS) })
	for i, e := range lines {
		e.Line = uint64(i + 1)
	}
	return d, lines, want
}
