package simulate

import (
	"slices"
	"testing"
)

// TestPagePoolFollowsSGLang pins the allocator semantics read from SGLang's
// PagedTokenToKVPoolAllocator: with need_sort, freed pages wait on
// release_pages until an allocation finds free_pages short; without it they
// go to the front of free_pages.
func TestPagePoolFollowsSGLang(t *testing.T) {
	ps := pageSize
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
			p := newPagePool(10)
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
	p := newPagePool(4)
	a := p.allocExtend(3 * pageSize) // 1 2 3
	p.release(a[:1])                 // page 1 waits
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
