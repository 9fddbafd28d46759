package simulate

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPagePoolFollowsSGLang pins the allocator semantics read from SGLang's
// PagedTokenToKVPoolAllocator: with need_sort, freed pages wait on
// release_pages until an allocation finds free_pages short; without it they
// go to the front of free_pages.
func TestPagePoolFollowsSGLang(t *testing.T) {
	ps := defaultPageSize
	tests := []struct {
		name     string
		needSort bool
		// after allocating 3 then 2 pages and freeing the first 3, a
		// prealloc of this many pages gets:
		pages int
		want  []int32
	}{
		// 2 pages: 2 + bs + 1 = 4 <= 5 free, no merge: walks on.
		{"need_sort no merge", true, 2, []int32{6, 7}},
		// 4 pages: 4 + 2 = 6 > 5 free: merge and sort first.
		{"need_sort merge", true, 4, []int32{1, 2, 3, 6}},
		{"no sort freed first", false, 2, []int32{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPagePool(10, defaultPageSize)
			p.needSort = tc.needSort
			a := p.allocExtend(3 * ps)
			b := p.allocExtend(2 * ps)
			if !slices.Equal(a, []int32{1, 2, 3}) || !slices.Equal(b, []int32{4, 5}) {
				t.Fatalf("fresh pool order %v %v", a, b)
			}
			p.release(a)
			if p.available() != 8 || p.used() != 2 {
				t.Fatalf("available %d used %d, want 8 and 2", p.available(), p.used())
			}
			if got := p.allocExtend(tc.pages * ps); !slices.Equal(got, tc.want) {
				t.Errorf("prealloc of %d pages = %v, want %v", tc.pages, got, tc.want)
			}
		})
	}
}

func TestPagePoolDecodeMergeNeedsBatch(t *testing.T) {
	p := newPagePool(4, defaultPageSize)
	a := p.allocExtend(3 * defaultPageSize) // 1 2 3
	p.release(a[:1])                        // page 1 waits
	if got := p.allocDecode(1); !slices.Equal(got, []int32{4}) {
		t.Fatalf("decode with one free page = %v, want [4]", got)
	}
	// free_pages empty: bs 1 > 0 merges the released page.
	if got := p.allocDecode(1); !slices.Equal(got, []int32{1}) {
		t.Fatalf("decode after merge = %v, want [1]", got)
	}
	if p.allocDecode(1) != nil {
		t.Fatal("allocation from an empty pool succeeded")
	}
}

// TestPagePoolRetraction pins decode retraction: the retracted request's
// pages are freed with its data in them (a later prealloc that merges can
// be handed them), its growth stops, and on resume it is preallocated as
// many pages again, written as its own prompt and output.
func TestPagePoolRetraction(t *testing.T) {
	ps := defaultPageSize
	p := newPagePool(10, defaultPageSize)
	r := &request{seq: 1, prompt: 2 * ps, completion: 6 * ps, promptPages: 2, every: 10}
	r.pages = p.allocExtend(r.prompt) // 1 2
	p.write(r.pages, r.seq, 7, false)
	p.startGrowth(r, 0, r.every, 7)
	p.advance(r.every) // token 1 sits at position 2*ps: page 3
	if !slices.Equal(r.pages, []int32{1, 2, 3}) {
		t.Fatalf("before retraction r holds %v, want [1 2 3]", r.pages)
	}
	p.allocExtend(2 * ps) // another request holds 4 5
	p.retract(r)
	if r.pages != nil || p.available() != 8 {
		t.Fatalf("after retraction: pages %v, available %d; want none and 8", r.pages, p.available())
	}
	// Its growth is dropped while it is retracted.
	p.advance(int64(10*ps) * r.every)
	if p.available() != 8 {
		t.Fatalf("a retracted request grew: available %d", p.available())
	}
	// 4 pages: 4 + 2 > 5 free merges: the victim gets r's old pages, with
	// r's prompt and output in them.
	v := p.allocExtend(4 * ps)
	if !slices.Equal(v, []int32{1, 2, 3, 6}) {
		t.Fatalf("prealloc after the retraction = %v, want [1 2 3 6]", v)
	}
	if p.last[1].writer != 1 || p.last[1].output || p.last[3].writer != 1 || !p.last[3].output {
		t.Fatalf("r's stale pages: last writes %+v", p.last[1:4])
	}
	p.write(v, 2, 8, false)
	got := p.resume(int64(20*ps)*r.every, r, 7)
	if !slices.Equal(got, []int32{7, 8, 9}) || !slices.Equal(r.pages, got) || r.retracted {
		t.Fatalf("resume = %v (r holds %v, retracted %v), want [7 8 9]", got, r.pages, r.retracted)
	}
	if p.last[7].writer != 1 || p.last[7].output || p.last[9].writer != 1 || !p.last[9].output {
		t.Fatalf("resumed pages: last writes %+v", p.last[7:10])
	}
	// Growth resumes after the held pages (one free page left: 10).
	p.advance(int64(40*ps) * r.every)
	if !slices.Contains(r.pages, 10) {
		t.Errorf("no growth after resume: r holds %v", r.pages)
	}
}

// TestPagePoolMergeEqualsSort checks merge_and_sort_free's bitmap against
// what SGLang does (concatenate, sort) on random lists: any split of the
// free pages between free_pages (sorted) and release_pages (any order),
// and a page freed twice, where the sort keeps both copies.
func TestPagePoolMergeEqualsSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		q := newPagePool(1+rng.IntN(3000), defaultPageSize)
		perm := rng.Perm(q.numPages)
		k := rng.IntN(q.numPages + 1)
		split := rng.IntN(k + 1)
		free := make([]int32, 0, split)
		for _, v := range perm[:split] {
			free = append(free, int32(v+1))
		}
		slices.Sort(free)
		rel := make([]int32, 0, k-split)
		for _, v := range perm[split:k] {
			rel = append(rel, int32(v+1))
		}
		if trial%10 == 0 && len(rel) > 0 {
			rel = append(rel, rel[0]) // freed twice
		}
		if trial%25 == 1 {
			rel = append(rel, -1) // outside the pool: the sort, no panic
		}
		q.free, q.released = free, rel
		want := append(slices.Clone(free), rel...)
		slices.Sort(want)
		q.merge()
		if !slices.Equal(q.free, want) {
			t.Fatalf("trial %d: merge gave %d pages, sort %d", trial, len(q.free), len(want))
		}
		for _, w := range q.marks {
			if w != 0 {
				t.Fatalf("trial %d: marks left set after the merge", trial)
			}
		}
	}
}
