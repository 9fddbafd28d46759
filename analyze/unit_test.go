package analyze

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

func TestTheilSen(t *testing.T) {
	line := func(n int, a, b float64) ([]float64, []float64) {
		xs, ys := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i] = float64(i * 1000)
			ys[i] = a + b*xs[i] + float64(i%7) // small noise
		}
		return xs, ys
	}
	for _, tc := range []struct {
		name     string
		mutate   func(xs, ys []float64)
		n        int
		ok       bool
		slope    float64
		maxSigma float64
	}{
		{name: "clean line", n: 200, ok: true, slope: 0.05, maxSigma: 5},
		{name: "25% impossible-fast outliers", n: 200, ok: true, slope: 0.05, maxSigma: 6,
			mutate: func(xs, ys []float64) {
				for i := 0; i < len(ys); i += 4 {
					ys[i] = 40 // TTFT 40 ms whatever the size
				}
			}},
		{name: "queueing spikes", n: 200, ok: true, slope: 0.05, maxSigma: 6,
			mutate: func(xs, ys []float64) {
				for i := 1; i < len(ys); i += 5 {
					ys[i] += 30000
				}
			}},
		{name: "too few points", n: 2, ok: false},
		{name: "thinned large sample", n: 3000, ok: true, slope: 0.05, maxSigma: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xs, ys := line(tc.n, 6, 0.05)
			if tc.mutate != nil {
				tc.mutate(xs, ys)
			}
			fit, ok := TheilSen(xs, ys)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if math.Abs(fit.Slope-tc.slope) > 0.001 {
				t.Errorf("slope = %v, want %v", fit.Slope, tc.slope)
			}
			if fit.Sigma > tc.maxSigma {
				t.Errorf("sigma = %v, want <= %v", fit.Sigma, tc.maxSigma)
			}
		})
	}
}

// TestLanePoolFollowsSGLang pins the replay's allocator to the rules read
// from SGLang's PagedTokenToKVPoolAllocator (python/sglang/srt/mem_cache/
// allocator.py, 0.4.10–0.5.17; mem_cache/allocator/paged.py in 0.5.18):
// with need_sort, free() puts pages on release_pages, and they rejoin
// free_pages, merged and sorted, only when an allocation finds free_pages
// short; without it, freed pages go to the front of free_pages. At a
// page size of one token (TokenToKVPoolAllocator) freed slots go to the
// end instead. The expected pages are worked out by hand from those
// rules, not taken from the simulator (TestReplayAllocatesAsSGLang
// compares with a transcription of both classes).
func TestLanePoolFollowsSGLang(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sorted bool
		steps  func(p *lanePool) []int32
		want   []int32
		ps     int // 2 when 0: the paged allocator
	}{
		{"fresh pool skips padding page 0", true, func(p *lanePool) []int32 { return takePages(p, 3, false, 0) }, []int32{1, 2, 3}, 0},
		{"need_sort: freed pages wait until free_pages is short", true, func(p *lanePool) []int32 {
			a := takePages(p, 4, false, 0)
			takePages(p, 2, false, 0)
			p.release(listOf(a[:2]...))
			return takePages(p, 3, false, 0)
		}, []int32{7, 8, 9}, 0},
		{"need_sort: a short allocation merges and sorts", true, func(p *lanePool) []int32 {
			a := takePages(p, 4, false, 0)
			takePages(p, 2, false, 0)
			p.release(listOf(a[:2]...))
			return takePages(p, 3, true, 0)
		}, []int32{1, 2, 7}, 0},
		{"no sort: freed pages go to the front", false, func(p *lanePool) []int32 {
			a := takePages(p, 4, false, 0)
			takePages(p, 2, false, 0)
			p.release(listOf(a[:2]...))
			return takePages(p, 3, false, 0)
		}, []int32{1, 2, 7}, 0},
		{"token, no sort: freed slots go to the end", false, func(p *lanePool) []int32 {
			a := takePages(p, 4, false, 0)
			takePages(p, 2, false, 0)
			p.release(listOf(a[1], a[0]))
			takePages(p, 3, false, 0)
			return takePages(p, 3, false, 0)
		}, []int32{10, 2, 1}, 1},
		{"token, need_sort: merged and sorted when the request needs more", true, func(p *lanePool) []int32 {
			a := takePages(p, 4, false, 0)
			takePages(p, 4, false, 0)
			p.release(listOf(a[1], a[0]))
			return takePages(p, 3, false, 0)
		}, []int32{1, 2, 9}, 1},
		{"over capacity returns nil", true, func(p *lanePool) []int32 { return takePages(p, 100, true, 0) }, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := cmp.Or(tc.ps, 2)
			if got := tc.steps(newLanePool(10, ps, tc.sorted)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLanePoolReusesFreedLists: a freed request's page list is handed to
// the next request that fits in it, holding that request's pages only, and
// no list held at the time shares its memory.
func TestLanePoolReusesFreedLists(t *testing.T) {
	p := newLanePool(16, 2, false)
	a := p.take(4, false, 0)
	p.release(a)
	p.recycle(a)
	b := p.take(3, false, 0)
	c := p.take(4, false, 0)
	if &b[:1][0] != &a[:1][0] {
		t.Error("the freed list was not reused")
	}
	if &c[:1][0] == &b[:1][0] {
		t.Error("two held lists share memory")
	}
	// a's pages went back to the head of free_pages, lowest first.
	if !slices.Equal(b.pages(), []int32{1, 2, 3}) || !slices.Equal(c.pages(), []int32{4, 5, 6, 7}) {
		t.Errorf("took %v and %v, want [1 2 3] and [4 5 6 7]", b, c)
	}
	// What waits for reuse stays bounded by the pool's size: a list
	// larger than that is dropped, not kept.
	p.recycle(make(pageList, 0, 4*p.keepMax))
	if p.kept != 0 {
		t.Errorf("kept %d runs of lists (bound %d) after freeing one larger than the bound", p.kept, p.keepMax)
	}
	p.recycle(c)
	if p.kept != cap(c) {
		t.Errorf("kept %d runs after freeing a list of %d", p.kept, cap(c))
	}
}

// TestLanePoolRecyclesCleanRecords: a lane's page records come from the
// lanes before it, which clear only what they wrote; a new lane, smaller or
// larger than the one before, still starts with every record empty.
func TestLanePoolRecyclesCleanRecords(t *testing.T) {
	reused := 0
	for range 10 {
		big := newLaneRun(100, 1, true, &replayAsk{})
		first := &big.p.pages[0]
		big.p.claim(big.p.take(100, false, 0), 100, 0)
		big.close()
		small := newLaneRun(50, 1, true, &replayAsk{})
		if &small.p.pages[0] == first {
			reused++
		}
		small.close()
		again := newLaneRun(100, 1, true, &replayAsk{})
		for q, st := range again.p.pages {
			if st != (pageState{}) || again.p.pieceAt(int32(q)) != 0 {
				t.Fatalf("page %d of a new lane holds %+v (piece %d) from an earlier lane", q, st, again.p.pieceAt(int32(q)))
			}
		}
		again.close()
	}
	if reused == 0 {
		t.Fatal("no lane reused an earlier lane's records; the test checked nothing")
	}
}

// TestLanePoolPiecesMatchPageRecords: a page's state read from its
// record and piece (claim, growth, lane compaction's renumbering) is
// what a record a page written at every claim holds, the replay's model
// before pieces: for every page, after every operation of random claims
// (runs, own and not), growth and renumberings. The larger pool's runs
// cover whole blocks, in one piece and mixed, and its growth fills
// them.
func TestLanePoolPiecesMatchPageRecords(t *testing.T) {
	for _, c := range []struct{ n, run int }{{120, 40}, {700, 300}} {
		t.Run(fmt.Sprintf("pool %d runs %d", c.n, c.run), func(t *testing.T) {
			testPiecesMatchRecords(t, int32(c.n), c.run)
		})
	}
}

func testPiecesMatchRecords(t *testing.T, n int32, run int) {
	const reqs = 40
	blocksSeen := 0
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 54))
		p := newLanePool(int(n), 1, true)
		for i := range reqs {
			p.reqs = append(p.reqs, &rreq{room: uint64(100 + i), first: uint64(1000 + i)})
		}
		holder := make([]int32, n+1)
		w, prevW := make([]uint32, n+1), make([]uint32, n+1)
		check := func(step int, what string) {
			t.Helper()
			for q := int32(0); q <= n; q++ {
				h, gw, gp := p.state(q)
				if h != holder[q] || gw != w[q] || gp != prevW[q] || p.holder(q) != h {
					t.Fatalf("seed %d step %d (%s): page %d is (holder %d, w %#x, prev %#x), want (%d, %#x, %#x)",
						seed, step, what, q, h, gw, gp, holder[q], w[q], prevW[q])
				}
			}
			// tally, which counts a block at once, against the pages'
			// writes counted one by one, over a random run of pages.
			a := int32(1 + rng.IntN(int(n)))
			pages := pageList{}.appendRun(a, min(int32(1+rng.IntN(3*run)), n+1-a))
			skip, self := rng.IntN(3), uint64(100+rng.IntN(reqs))
			got, want := map[uint64]*SourcePages{}, map[uint64]*SourcePages{}
			p.tally(got, pages, skip, self)
			for _, q := range pages.pages()[min(skip, pages.count()):] {
				if i := writerOf(w[q]); i != 0 {
					addWriter(want, p.reqs[i-1].room, isOut(w[q]), p.reqs[i-1].first, self)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d (%s): tally of %v skipping %d is %v, want %v", seed, step, what, pages, skip, fmtSources(got), fmtSources(want))
			}
		}
		for step := range 400 {
			switch op := rng.IntN(10); {
			case op < 5: // a claim: up to three disjoint runs, own a prefix
				var pages pageList
				used := make([]bool, n+2)
				for range 1 + rng.IntN(3) {
					a := int32(1 + rng.IntN(int(n)))
					k := int32(1 + rng.IntN(run))
					for ; k > 0 && a <= n && !used[a]; a, k = a+1, k-1 {
						used[a] = true
						pages = append(pages, span{a, 1})
					}
				}
				var merged pageList
				for _, s := range pages {
					merged = merged.appendRun(s.first, s.n)
				}
				own, ri := rng.IntN(merged.count()+1), int32(rng.IntN(reqs))
				p.claim(merged, own, ri)
				for i, q := range merged.pages() {
					holder[q] = ri + 1
					if i < own {
						prevW[q], w[q] = w[q], written(ri+1, false)
					}
				}
				check(step, fmt.Sprintf("claim %v own %d by %d", merged, own, ri))
				for _, k := range p.blk {
					if k != mixed && k != 0 {
						blocksSeen++
					}
				}
			case op < 9: // growth into a page or, lowest first, a few
				q, ri := int32(1+rng.IntN(int(n))), int32(rng.IntN(reqs))
				for k := 1 + rng.IntN(run/2); k > 0 && q <= n; q, k = q+1, k-1 {
					p.grow(q, ri)
					holder[q], prevW[q], w[q] = ri+1, w[q], written(ri+1, true)
					check(step, fmt.Sprintf("grow %d by %d", q, ri))
				}
			default: // compaction renames every request (a reversal)
				ref := func(i int32) int32 {
					if i == 0 {
						return 0
					}
					return reqs + 1 - i
				}
				p.renumber(ref)
				for q := range holder {
					holder[q] = ref(holder[q])
					w[q] = written(ref(writerOf(w[q])), isOut(w[q]))
					prevW[q] = written(ref(writerOf(prevW[q])), isOut(prevW[q]))
				}
				check(step, "renumber")
				if len(p.pieces) > int(n)+1 {
					t.Fatalf("seed %d: %d pieces kept for %d pages", seed, len(p.pieces), n)
				}
			}
		}
	}
	if n >= 2*blockPages && blocksSeen == 0 {
		t.Fatal("no claim left a block in one piece: the blocks went untested")
	}
}

// takePages is take a page at a time (nil when take's list is nil).
func takePages(p *lanePool, n int, short bool, spare int) []int32 {
	l := p.take(n, short, spare)
	if l == nil {
		return nil
	}
	return l.pages()
}

// TestRunLaneWriters: a victim preallocated after a merge reads the pages
// the earliest finished requests wrote; a later writer whose pages wait on
// release_pages is not its writer.
func TestRunLaneWriters(t *testing.T) {
	at := func(s int) int64 { return int64(s) * int64(time.Second) }
	// Page size 2 (the paged allocator), two tokens a page.
	a := &rreq{room: 11, prompt: 8, ownWrites: true, first: 1, last: 3}
	b := &rreq{room: 22, prompt: 8, ownWrites: true, first: 2, last: 5}
	c := &rreq{room: 33, prompt: 4, ownWrites: true, first: 4, last: 6}
	v := &rreq{room: 99, prompt: 8, ownWrites: true, placeholder: true, first: 7, last: 7}
	reqs := []*rreq{a, b, c, v}
	ops := []op{
		{at(1), 1, 0, opPrealloc}, {at(2), 2, 1, opPrealloc}, {at(3), 3, 0, opFree},
		{at(4), 4, 2, opPrealloc}, {at(5), 5, 1, opFree}, {at(6), 6, 2, opFree},
		// 10 pages: 8 + 2 held/freed, 2 free left; 8/2+2 > 2 merges.
		{at(7), 7, 3, opPrealloc},
	}
	res, _ := runLane(ops, reqs, 10, 2, true, &replayAsk{writers: map[uint64]bool{99: true}})
	got := res[99]
	if got == nil {
		t.Fatal("no replay for the victim")
	}
	// c merged a's pages and took 1,2; the victim's merge gives it 1..4,
	// whose first page is its own placeholder write: 2 was c's, 3,4 a's.
	// b's pages 5..8 are next in the list: possible.
	if len(got.Likely) != 2 || got.Likely[11] == nil || got.Likely[11].Prompt != 2 || got.Likely[33] == nil || got.Likely[33].Prompt != 1 {
		t.Errorf("likely writers = %v, want room 11 on 2 and room 33 on 1 prompt pages", got.Likely)
	}
	// Each writer is cited by the line it wrote with (its Receive line).
	if w := got.Likely[11]; w != nil && !slices.Equal(w.Lines, []uint64{1}) {
		t.Errorf("room 11 cited by lines %v, want its Receive line 1", w.Lines)
	}
	if got.Possible[22] == nil {
		t.Errorf("possible writers %v lack the neighbour room 22", got.Possible)
	}
}

func TestFindingIDs(t *testing.T) {
	a, b := findingID("x", "1", "req"), findingID("x", "2", "req")
	if a == b {
		t.Error("a new version must give new finding ids")
	}
	if a != findingID("x", "1", "req") {
		t.Error("finding id is not deterministic")
	}
	fs := finalize(&OverThreshold{}, []Finding{{RequestKey: "k", Evidence: []uint64{3, 1, 3, 0}}, {RequestKey: "k"}})
	if len(fs) != 1 || !slices.Equal(fs[0].Evidence, []uint64{1, 3}) {
		t.Errorf("finalize = %+v, want one finding with evidence [1 3]", fs)
	}
}

func TestCommas(t *testing.T) {
	for in, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 703366: "703,366", 1048576: "1,048,576"} {
		if got := commas(in); got != want {
			t.Errorf("commas(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestReconstructionGrouping folds findings into per-tenant rows without
// a database (no rooms, so no lineage queries).
func TestReconstructionGrouping(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	d := &Dataset{Window: Window{From: t0, To: t0.Add(time.Hour)}, Cfg: Config{ignorePages: true}, complete: true, ByKey: map[string]*Fact{
		"src":  {Key: "src", Tenant: "hooli", Model: "m", TS: t0},
		"src2": {Key: "src2", Tenant: "acme", Model: "m", TS: t0},
	}, ByRoom: map[uint64]*Fact{}, Boots: &Boots{ByNode: map[string][]*Boot{}}}
	fs := []Finding{
		{ID: "f1", Analyzer: "abort_reuse", Severity: Medium, Confidence: 0.6, RequestKey: "v1", Tenant: "acme", TS: t0.Add(time.Minute), DecodeNode: "decode-0", ForeignRequestKeys: []string{"src"}},
		{ID: "f2", Analyzer: "abort_reuse", Severity: Low, Confidence: 0.2, RequestKey: "v2", Tenant: "acme", TS: t0, ForeignRequestKeys: []string{"src"}},
		{ID: "f3", Analyzer: "abort_reuse", Severity: Medium, Confidence: 0.3, RequestKey: "v3", Tenant: "acme", TS: t0, ForeignRequestKeys: []string{"src2"}},
		{ID: "f4", Analyzer: "pool_below_context", Severity: Medium, Confidence: 0.9},
		{ID: "f5", Analyzer: "rejected_served", Severity: High, Confidence: 0.9, RequestKey: "v4", Tenant: "wayne", TS: t0.Add(2 * time.Minute), PrefillNode: "prefill-1"},
	}
	rec, err := buildReconstruction(context.Background(), d, fs)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		role, tenant string
		n            int
		conf         float64
	}
	var got []row
	for _, r := range rec.Rows {
		got = append(got, row{string(r.Role), r.Tenant, r.Requests, math.Round(r.Confidence*100) / 100})
	}
	want := []row{
		{string(RoleReceived), "acme", 1, 0.6},   // v1 read hooli's KV; v3 read acme's own (not foreign); v2 is LOW
		{string(RoleReceived), "wayne", 1, 0.45}, // no lineage known: assumed foreign at half confidence
		{string(RoleExposed), "hooli", 1, 0.6},
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows = %+v, want %+v", got, want)
	}
	again, _ := buildReconstruction(context.Background(), d, fs)
	if again.ID != rec.ID {
		t.Error("reconstruction id is not deterministic")
	}
}

// The fit's sample, kept bounded as the points stream in (cut back as it
// grows, later points above its highest skipped), is exactly the lowest
// points of the node by hash and key, whatever the order they come in.
func TestSpeedSampleIsTheLowestHashes(t *testing.T) {
	hashed := func(n int) []speedPoint {
		var ps []speedPoint
		for i := range n {
			ps = append(ps, newSpeedPoint(fmt.Sprintf("req-%d", i), uint64(1000+i), 0, float64(i), true))
		}
		return ps
	}
	// withHashes gives point i hash h(i), to order the stream on purpose.
	withHashes := func(n int, h func(i int) uint64) []speedPoint {
		ps := hashed(n)
		for i := range ps {
			ps[i].h = h(i)
		}
		return ps
	}
	for _, tc := range []struct {
		name   string
		points []speedPoint
		limit  int
	}{
		{"fewer than the sample", hashed(150), 200},
		{"never cut back", hashed(700), 200},
		{"cut back many times", hashed(20_000), 200},
		{"lowest last", withHashes(5_000, func(i int) uint64 { return uint64(5_000 - i) }), 200},
		{"lowest first", withHashes(5_000, func(i int) uint64 { return uint64(i) }), 200},
		// After the first cut (to hashes 0, 2, …, 398), points that fall
		// between the highest kept ones must still get in.
		{"between the kept", withHashes(810, func(i int) uint64 {
			if i < 800 {
				return uint64(2 * i)
			}
			return uint64(301 + 2*(i-800))
		}), 200},
		{"equal hashes, keys decide", withHashes(3_000, func(i int) uint64 { return uint64(i % 3) }), 200},
		{"no limit", hashed(5_000), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sn speedNode
			for _, p := range tc.points {
				sn.add(p, tc.limit)
			}
			if sn.n != len(tc.points) {
				t.Fatalf("counted %d points, want %d", sn.n, len(tc.points))
			}
			if tc.limit == 0 {
				if len(sn.sample) != len(tc.points) {
					t.Fatalf("no limit: kept %d of %d points", len(sn.sample), len(tc.points))
				}
				return
			}
			got := lowestHashes(sn.sample, tc.limit)
			want := lowestHashes(slices.Clone(tc.points), tc.limit)
			if !slices.Equal(got, want) {
				t.Fatalf("sample of %d differs from the %d lowest hashes of all points", len(got), len(want))
			}
		})
	}
}

func TestUniqSortedU64(t *testing.T) {
	for _, tc := range []struct {
		in, want []uint64
	}{
		{nil, []uint64{}},
		{[]uint64{0, 0}, []uint64{}},
		{[]uint64{5, 3, 0, 5, 9, 3, 1}, []uint64{1, 3, 5, 9}},
		{[]uint64{1 << 63, 2, 1 << 63}, []uint64{2, 1 << 63}},
	} {
		in := slices.Clone(tc.in)
		if got := uniqSortedU64(in); !slices.Equal(got, tc.want) {
			t.Errorf("uniqSortedU64(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("uniqSortedU64 changed its input %v to %v", tc.in, in)
		}
	}
}

// The list's rows keep their request keys unique by compacting them as
// they grow and their findings as bits in the table of victim findings:
// folded from many adds with repeats (past several compactions), each row
// holds what sets of its keys and findings hold, and its tokens count
// every add.
func TestAffectedListAddsKeysAndFindingsOnce(t *testing.T) {
	ids := make([]string, 300) // past several words of the bit set
	for i := range ids {
		ids[i] = fmt.Sprintf("finding-%03d", (i*7919)%300) // the table is not in id order
	}
	l := affectedList{rows: map[string]*affectedAcc{}, findingIDs: ids}
	type want struct {
		keys, finds map[string]bool
		prompt      int64
	}
	wants := map[string]*want{}
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for n := range 60_000 {
		tenant := []string{"acme", "hooli", "wayne"}[rng.IntN(3)]
		key := fmt.Sprintf("req-%05d", rng.IntN(9_000))
		if n%5000 == 0 {
			key = "" // a key the list keeps as any other
		}
		var fis []int32
		for range rng.IntN(4) {
			fis = append(fis, int32(rng.IntN(len(ids))))
		}
		l.add(RoleExposed, domain.Possible, tenant, key, "m", "decode-0", t0, 0.5, fis, "other", 2, 0, nil, nil)
		w := wants[tenant]
		if w == nil {
			w = &want{keys: map[string]bool{}, finds: map[string]bool{}}
			wants[tenant] = w
		}
		w.keys[key] = true
		for _, fi := range fis {
			w.finds[ids[fi]] = true
		}
		w.prompt += 2
	}
	rows := l.sorted()
	if len(rows) != len(wants) {
		t.Fatalf("%d rows, want %d", len(rows), len(wants))
	}
	for _, r := range rows {
		w := wants[r.Tenant]
		if wk := slices.Sorted(maps.Keys(w.keys)); !slices.Equal(r.RequestKeys, wk) || r.Requests != len(wk) {
			t.Errorf("%s: %d request keys (Requests %d), want the %d distinct, sorted", r.Tenant, len(r.RequestKeys), r.Requests, len(wk))
		}
		if wf := slices.Sorted(maps.Keys(w.finds)); !slices.Equal(r.FindingIDs, wf) {
			t.Errorf("%s: findings %d, want the %d distinct, sorted", r.Tenant, len(r.FindingIDs), len(wf))
		}
		if r.PromptTokens != w.prompt {
			t.Errorf("%s: prompt tokens %d, want %d (every add counts)", r.Tenant, r.PromptTokens, w.prompt)
		}
	}
}

// A victim's findings take its foreign tenants and keys: those naming
// none share the victim's slices, those naming some get their own merged
// copy (the shared slices unchanged), and a finding that already names
// them all is not changed.
func TestWithForeign(t *testing.T) {
	tenants, keys := foreignOf([]foreignRef{{"hooli", "k2"}, {"acme", "k1"}, {"hooli", "k2"}})
	if !slices.Equal(tenants, []string{"acme", "hooli"}) || !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("foreignOf = %v %v, want sorted and unique", tenants, keys)
	}
	for _, tc := range []struct {
		name             string
		f                Finding
		changed, shared  bool
		wantTen, wantKey []string
	}{
		{"names none", Finding{ID: "a"}, true, true, []string{"acme", "hooli"}, []string{"k1", "k2"}},
		{"names others", Finding{ID: "b", ForeignTenants: []string{"wayne"}, ForeignRequestKeys: []string{"k0", "k2"}}, true, false,
			[]string{"acme", "hooli", "wayne"}, []string{"k0", "k1", "k2"}},
		{"names them all", Finding{ID: "c", ForeignTenants: []string{"hooli", "acme"}, ForeignRequestKeys: []string{"k2", "k1"}}, false, false,
			[]string{"hooli", "acme"}, []string{"k2", "k1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := withForeign(tc.f, tenants, keys)
			if changed != tc.changed || !slices.Equal(got.ForeignTenants, tc.wantTen) || !slices.Equal(got.ForeignRequestKeys, tc.wantKey) {
				t.Errorf("= %v %v changed %v, want %v %v changed %v", got.ForeignTenants, got.ForeignRequestKeys, changed,
					tc.wantTen, tc.wantKey, tc.changed)
			}
			if shared := &got.ForeignRequestKeys[0] == &keys[0]; shared != tc.shared {
				t.Errorf("shares the victim's keys: %v, want %v", shared, tc.shared)
			}
			if !slices.Equal(tenants, []string{"acme", "hooli"}) || !slices.Equal(keys, []string{"k1", "k2"}) {
				t.Errorf("the victim's slices changed: %v %v", tenants, keys)
			}
		})
	}
}

func fmtSources(m map[uint64]*SourcePages) string {
	var b strings.Builder
	for _, r := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%d:%+v ", r, *m[r])
	}
	return b.String()
}
