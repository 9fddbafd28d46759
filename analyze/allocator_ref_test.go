package analyze

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// sglAllocator transcribes SGLang's two KV allocators, line for line, from
// sgl-project/sglang python/sglang/srt/mem_cache/allocator.py at 02e29cb1
// (TokenToKVPoolAllocator, used when page_size == 1, and
// PagedTokenToKVPoolAllocator), as the decode server calls them
// (disaggregation/decode.py at 0035ca42: alloc(delta_len) at page size 1,
// else alloc_extend; one alloc_decode, or alloc(bs), a step). It is the
// replay's reference: it shares no code with lanePool, and tensors are
// slices of page (slot) numbers.
type sglAllocator struct {
	pageSize          int
	needSort          bool
	freePages         []int32
	releasePages      []int32
	held              map[int][]int32
	running           int // requests holding pages: the decode batch
	tokenAllocatorCls bool
}

func newSGLAllocator(pages, pageSize int, needSort bool) *sglAllocator {
	a := &sglAllocator{pageSize: pageSize, needSort: needSort, held: map[int][]int32{},
		tokenAllocatorCls: pageSize == 1}
	// clear(): free_pages = torch.arange(1, num_pages + 1); page 0 pads.
	for i := 1; i <= pages; i++ {
		a.freePages = append(a.freePages, int32(i))
	}
	return a
}

// availableSize is len(free_pages) + len(release_pages): what the prealloc
// queue budgets with.
func (a *sglAllocator) availableSize() int { return len(a.freePages) + len(a.releasePages) }

func (a *sglAllocator) mergeAndSortFree() {
	a.freePages = append(a.freePages, a.releasePages...)
	slices.Sort(a.freePages)
	a.releasePages = nil
}

func (a *sglAllocator) takeHead(n int) []int32 {
	out := slices.Clone(a.freePages[:n])
	a.freePages = a.freePages[n:]
	return out
}

// prealloc is the decode prealloc of a request of tokens prompt tokens.
func (a *sglAllocator) prealloc(req, tokens int) []int32 {
	if a.tokenAllocatorCls {
		// TokenToKVPoolAllocator.alloc(need_size)
		if a.needSort && tokens > len(a.freePages) {
			a.mergeAndSortFree()
		}
		if tokens > len(a.freePages) {
			return nil
		}
		return a.hold(req, a.takeHead(tokens))
	}
	// alloc_extend with prefix 0 and one sequence (bs = 1).
	bs := 1
	if a.needSort && tokens/a.pageSize+bs+1 > len(a.freePages) {
		a.mergeAndSortFree()
	}
	n := (tokens + a.pageSize - 1) / a.pageSize
	if n > len(a.freePages) {
		return nil
	}
	return a.hold(req, a.takeHead(n))
}

// grow is one decode step's new page for req, in a batch of the running
// requests: alloc_decode(bs), or alloc(bs) at page size 1 (whose slot for
// this request is the one taken here).
func (a *sglAllocator) grow(req int) []int32 {
	bs := max(a.running, 1)
	if a.needSort && bs > len(a.freePages) {
		a.mergeAndSortFree()
	}
	if len(a.freePages) == 0 {
		return nil
	}
	return a.hold(req, a.takeHead(1))
}

func (a *sglAllocator) hold(req int, pages []int32) []int32 {
	if _, ok := a.held[req]; !ok {
		a.running++
	}
	a.held[req] = append(a.held[req], pages...)
	return pages
}

// free is free(free_index) of a request's slots, in its order.
func (a *sglAllocator) free(req int) {
	idx, ok := a.held[req]
	if !ok {
		return
	}
	delete(a.held, req)
	a.running--
	if a.tokenAllocatorCls {
		if a.needSort {
			a.releasePages = append(a.releasePages, idx...)
		} else {
			a.freePages = append(a.freePages, idx...) // torch.cat((free_pages, free_index))
		}
		return
	}
	// free_page_indices = torch.unique(free_index // page_size): sorted.
	u := slices.Clone(idx)
	slices.Sort(u)
	u = slices.Compact(u)
	if a.needSort {
		a.releasePages = append(u, a.releasePages...)
	} else {
		a.freePages = append(u, a.freePages...)
	}
}

// TestReplayAllocatesAsSGLang drives the replay's lane (laneRun.apply, so
// the merge conditions step chooses are under test too) and the
// transcription of SGLang's allocators with the same random preallocs,
// decode steps and frees, and requires every request to get the same
// pages. Both allocator classes, with and without need_sort, on pools
// small enough that merges, and waits for release_pages, are frequent;
// and on pools whose prompts span whole words of the free set, which the
// replay takes and merges a run at a time.
func TestReplayAllocatesAsSGLang(t *testing.T) {
	for _, tc := range []struct {
		ps       int
		needSort bool
		pages    int // the pool; 96 when 0
		most     int // the most pages a prompt takes; 24 when 0
	}{{1, true, 0, 0}, {1, false, 0, 0}, {4, true, 0, 0}, {4, false, 0, 0}, {64, true, 0, 0}, {64, false, 0, 0},
		{1, true, 1000, 300}, {1, false, 1000, 300}, {2, true, 1000, 300}} {
		pages, most := cmp.Or(tc.pages, 96), cmp.Or(tc.most, 24)
		t.Run(fmt.Sprintf("page_size=%d need_sort=%v pages=%d", tc.ps, tc.needSort, pages), func(t *testing.T) {
			for seed := int64(1); seed <= 20; seed++ {
				rng := rand.New(rand.NewSource(seed))
				ref := newSGLAllocator(pages, tc.ps, tc.needSort)
				lr := newLaneRun(pages, tc.ps, tc.needSort, &replayAsk{})
				var reqs []*rreq
				live := map[int]bool{}
				merges := 0
				for step := range 3000 {
					before := len(ref.releasePages)
					var o op
					switch k := rng.Intn(10); {
					case k < 3 || len(live) == 0:
						tokens := 1 + rng.Intn(most*tc.ps)
						n := (tokens + tc.ps - 1) / tc.ps
						// The prealloc queue takes a request only when
						// available_size() holds it.
						if n > ref.availableSize() {
							continue
						}
						ri := len(reqs)
						reqs = append(reqs, &rreq{room: uint64(ri + 1), prompt: tokens, ownWrites: true})
						ref.prealloc(ri, tokens)
						live[ri] = true
						o = op{at: int64(step), ri: int32(ri), kind: opPrealloc}
					case k < 7:
						ri := anyOf(rng, live)
						if ref.availableSize() == 0 {
							continue
						}
						ref.grow(ri)
						o = op{at: int64(step), ri: int32(ri), kind: opGrow}
					default:
						ri := anyOf(rng, live)
						ref.free(ri)
						delete(live, ri)
						o = op{at: int64(step), ri: int32(ri), kind: opFree}
					}
					lr.apply(reqs, o)
					if before > 0 && len(ref.releasePages) == 0 {
						merges++
					}
					for ri := range live {
						if got, want := lr.p.held[ri].pages(), ref.held[ri]; !slices.Equal(got, want) {
							t.Fatalf("seed %d, step %d (%v of request %d): the replay holds %v for request %d, SGLang %v",
								seed, step, o.kind, o.ri, got, ri, want)
						}
					}
				}
				if tc.needSort && merges == 0 {
					t.Fatalf("seed %d: release_pages was never merged; the merge conditions were not compared", seed)
				}
				lr.close()
			}
		})
	}
}

// anyOf is a random key of m, the same for the same generator.
func anyOf(rng *rand.Rand, m map[int]bool) int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[rng.Intn(len(keys))]
}
