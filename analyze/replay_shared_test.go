package analyze

import (
	"context"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/simulate"
)

// TestSharedReplay: a run replays the decode allocator once, for
// abort_reuse and the reconstruction together, and the notification list
// it builds is the one a reconstruction replaying only its own victims
// builds from the same findings (a room's answer does not depend on what
// else the replay was asked), and only the victims' lineage is kept. Without the replay (SkipReplay) every
// victim falls back to its node/rank window: the list loses its likely
// tier.
func TestSharedReplay(t *testing.T) {
	ctx := context.Background()
	// Its own scenario: the simulated files belong to the one test that
	// uses a scenario (helpers_test.go).
	db, _ := loaded(t, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.1, Tenants: 120,
		DecodePool: 1_245_184})
	cfg := DefaultConfig()
	r := &Runner{DB: db, Cfg: cfg, Trigger: "test", Now: func() time.Time { return testNow }}

	// What Run does, keeping the dataset.
	d, err := r.Load(ctx, Window{})
	if err != nil {
		t.Fatal(err)
	}
	var noted victimRooms
	for _, a := range All(cfg) {
		res := r.RunAnalyzer(ctx, d, a)
		if res.Run.Status == StatusError {
			t.Fatalf("%s: %s", a.Name(), res.Run.Error)
		}
		if err := db.SaveFindings(ctx, res.Findings, testNow); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveRun(ctx, res.Run); err != nil {
			t.Fatal(err)
		}
		for i := range res.Findings {
			noted.add(&res.Findings[i])
		}
		d.noteVictims(&noted)
	}
	// The stored findings the reconstruction reads, before it writes the
	// replay's foreign keys back into them.
	fs, err := db.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := r.Reconstruct(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if d.replay == nil || d.replay.passes != 1 {
		t.Fatalf("replay passes = %+v, want exactly 1 shared by abort_reuse and the reconstruction", d.replay)
	}

	// The same findings, a fresh dataset: its replay is asked about the
	// victims only.
	d2, err := r.Load(ctx, Window{})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := buildReconstruction(ctx, d2, fs)
	if err != nil {
		t.Fatal(err)
	}
	// The shared replay keeps the victims' lineage only: abort_reuse's
	// candidates were answered (holders) and not kept.
	if d2.replay == nil || !sameSet(d2.replay.asked, d.replay.asked) || d.replay.res.len() > len(d.replay.asked) {
		t.Fatalf("the victims-only replay kept %d rooms' lineage; the shared one was asked %d and kept %d; want the same victims",
			len(d2.replay.asked), len(d.replay.asked), d.replay.res.len())
	}
	likely := 0
	for _, row := range shared.Rows {
		if row.Tier == Likely {
			likely++
		}
	}
	if likely == 0 {
		t.Fatal("no likely exposed row: the replay answered nothing")
	}
	// The list Reconstruct stored, folded by the server, is the list
	// folded in memory.
	sameList(t, "shared replay, stored", storedList(t, db, shared), "victims-only replay, in memory", alone.Rows)
	sameList(t, "shared replay, as returned", shared.Rows, "victims-only replay, without keys", heads(alone.Rows))

	// Folded one victim at a time (each batch reads its own writers'
	// owners: a victim names more than one writer room), the list and the victim findings' foreign tenants are the
	// same as in one batch.
	_, whole, err := buildReconstructionFindings(ctx, d2, fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { ownersPerRead = n }(ownersPerRead)
	ownersPerRead = 1
	one, oneUpdated, err := buildReconstructionFindings(ctx, d2, fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	victims := map[string]bool{}
	for i := range fs {
		if marksVictim(fs[i].Analyzer, &fs[i]) && fs[i].Room != 0 {
			victims[fs[i].RequestKey] = true
		}
	}
	if len(victims) < 2 || len(whole) == 0 {
		t.Fatalf("%d victims with a room, %d findings given foreign tenants: too few to compare batches", len(victims), len(whole))
	}
	if !reflect.DeepEqual(one.Rows, alone.Rows) || one.ID != alone.ID {
		t.Error("the list folded one victim a batch differs from the list folded in one batch")
	}
	if !reflect.DeepEqual(oneUpdated, whole) {
		t.Errorf("folded one victim a batch, %d findings given foreign tenants; in one batch %d, or the same number differing",
			len(oneUpdated), len(whole))
	}
	// Reconstruct wrote those lists into the stored findings (of an
	// earlier run: by mutation), each into its own finding.
	noPendingMutations(t, db)
	after, err := db.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Finding{}
	for _, f := range after {
		byID[f.ID] = f
	}
	for _, u := range whole {
		got := byID[fs[u.at].ID]
		if !slices.Equal(got.ForeignTenants, u.tenants) || !slices.Equal(got.ForeignRequestKeys, u.keys) {
			t.Fatalf("stored finding %s: foreign %v %v, want %v %v", got.ID, got.ForeignTenants, got.ForeignRequestKeys, u.tenants, u.keys)
		}
	}

	// Its answers dropped (as the Runner drops them once its list is
	// built), the Dataset replays again when asked, to the same list.
	d.dropReplayAnswers()
	again, err := buildReconstruction(ctx, d, fs)
	if err != nil {
		t.Fatal(err)
	}
	if d.replay.passes != 2 || !reflect.DeepEqual(again.Rows, alone.Rows) {
		t.Errorf("after the answers were dropped: %d replay passes, want 2; the same list: %v",
			d.replay.passes, reflect.DeepEqual(again.Rows, alone.Rows))
	}

	// Without the replay: no likely row, the window fallback instead.
	skip := cfg
	skip.SkipReplay = true
	d3, err := (&Runner{DB: db, Cfg: skip}).Load(ctx, Window{})
	if err != nil {
		t.Fatal(err)
	}
	none, err := buildReconstruction(ctx, d3, fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range none.Rows {
		if row.Tier == Likely && row.Role == RoleExposed {
			t.Errorf("SkipReplay: %s is likely, want no replayed tier", row.Tenant)
		}
	}
	if d3.replay != nil {
		t.Errorf("SkipReplay replayed %d rooms", len(d3.replay.asked))
	}
}

// The abort candidates asked about are a sorted list without repeats.
func TestRoomsSet(t *testing.T) {
	s := roomsOf([]uint64{9, 3, 9, 1, 3, 1 << 63})
	if !slices.Equal(s, rooms{1, 3, 9, 1 << 63}) {
		t.Fatalf("roomsOf: %v", s)
	}
	for _, r := range []uint64{1, 3, 9, 1 << 63} {
		if !s.has(r) {
			t.Errorf("%d is in the set", r)
		}
	}
	for _, r := range []uint64{0, 2, 10, 1<<64 - 1} {
		if s.has(r) {
			t.Errorf("%d is not in the set", r)
		}
	}
	if rooms(nil).has(0) {
		t.Error("an empty set has nothing")
	}
}

// BenchmarkRoomsHas: the lanes ask, for every request they admit, whether
// it is an abort candidate. The sorted list against the map it replaced,
// at scale 100's 550,000 candidates, for rooms half of which are in it.
func BenchmarkRoomsHas(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	all := make([]uint64, 1_100_000)
	for i := range all {
		all[i] = rng.Uint64()
	}
	list := roomsOf(slices.Clone(all[:550_000]))
	set := make(map[uint64]bool, len(list))
	for _, r := range list {
		set[r] = true
	}
	b.Run("sorted list", func(b *testing.B) {
		n := 0
		for i := 0; b.Loop(); i++ {
			if list.has(all[i%len(all)]) {
				n++
			}
		}
		_ = n
	})
	b.Run("map", func(b *testing.B) {
		n := 0
		for i := 0; b.Loop(); i++ {
			if set[all[i%len(all)]] {
				n++
			}
		}
		_ = n
	})
}
