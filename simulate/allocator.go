package simulate

import (
	"container/heap"
	"math/bits"
	"slices"
)

// pagePool is one decode DP rank's paged KV pool, modelled on SGLang's
// PagedTokenToKVPoolAllocator (python/sglang/srt/mem_cache/allocator.py,
// mem_cache/allocator/paged.py from v0.5.13 on, c06220159b #26675):
//
//   - free_pages is an ordered list; every allocation takes pages from its
//     head. At boot it holds 1..numPages (page 0 is the padding page).
//   - need_sort (set when disaggregation_mode is prefill or decode, 0.5.2+;
//     unconditionally in 0.4.10-0.5.1): free() puts pages on release_pages.
//     They rejoin free_pages, concatenated and sorted, only when an
//     allocation finds free_pages short (merge_and_sort_free). Between
//     merges allocations walk forward through the old list.
//   - without need_sort (non-PD, or before 0.4.10): freed pages are put in
//     front of free_pages, so the most recently freed are reused first.
//
// The merge threshold differs by call: alloc() merges when pages >
// len(free_pages), alloc_extend (decode prealloc) when extend_tokens /
// page_size + bs + 1 > len(free_pages), alloc_decode when bs >
// len(free_pages), bs being the batch size.
//
// last remembers who last wrote each page and whether as prompt or
// generated output; the truth builder reads it when a request reads stale
// pages.
type pagePool struct {
	numPages int
	pageSize int
	needSort bool
	free     []int32 // free_pages; head first
	released []int32 // release_pages (need_sort only)
	nheld    int
	last     []pageWrite
	growing  growHeap
	merges   int
	marks    []uint64 // mergeUnique's bitmap, all zero between merges
}

func newPagePool(numPages, pageSize int) *pagePool {
	p := &pagePool{numPages: numPages, pageSize: pageSize, needSort: true}
	p.free = make([]int32, numPages)
	for i := range p.free {
		p.free[i] = int32(i + 1)
	}
	p.last = make([]pageWrite, numPages+1)
	return p
}

// pageWrite is a page's last write, in one record: at a page size of one
// token a prompt writes thousands of pages, and three arrays were three
// cache misses a page.
type pageWrite struct {
	writer uint32 // seq of the last writer, 0 = never written
	tenant uint16
	output bool // generated output, not prompt
}

// available is SGLang's available_size() in pages: free plus released.
func (p *pagePool) available() int { return len(p.free) + len(p.released) }

func (p *pagePool) merge() {
	if len(p.released) == 0 {
		return
	}
	if !p.mergeUnique() {
		p.free = append(p.free, p.released...)
		slices.Sort(p.free)
	}
	p.released = p.released[:0]
	p.merges++
}

// mergeUnique is merge_and_sort_free by marking each page in a bitmap of
// the pool and reading the marks in order: a page id lies in [1, numPages],
// so the sorted list is the marked ids in turn. A pool merges hundreds of
// times a run; sorting the whole list each time was a third of the
// simulator's CPU. The result equals the sort's as
// long as no page is listed twice, which holds while nothing frees a page
// twice; if one is (a mark already set), it reports false, the marks are
// cleared and the caller sorts, which keeps the duplicate as SGLang would.
func (p *pagePool) mergeUnique() bool {
	words := p.numPages/64 + 1
	if cap(p.marks) < words {
		p.marks = make([]uint64, words)
	}
	m := p.marks[:words]
	for _, list := range [][]int32{p.free, p.released} {
		for _, pg := range list {
			// Unsigned: a negative id is out of range too, and the shift
			// and mask need no sign fix-up (a page at a time, at a page
			// size of one token, this loop is a quarter of the run).
			u := uint32(pg)
			if int(u>>6) >= words || m[u>>6]&(1<<(u&63)) != 0 {
				clear(m)
				return false
			}
			m[u>>6] |= 1 << (u & 63)
		}
	}
	n := len(p.free) + len(p.released)
	out := p.free[:0] // the old list is in the marks now
	if cap(out) < n {
		out = make([]int32, 0, n)
	}
	for w, bitsw := range m {
		if bitsw == ^uint64(0) {
			// A whole word of free pages, in order.
			for b := range 64 {
				out = append(out, int32(w*64+b))
			}
			m[w] = 0
			continue
		}
		for bitsw != 0 {
			out = append(out, int32(w*64+bits.TrailingZeros64(bitsw)))
			bitsw &= bitsw - 1
		}
		m[w] = 0
	}
	p.free = out
	return true
}

// take hands out n pages from the head of free_pages after merging when
// short is true (need_sort only); nil if free_pages cannot hold them.
func (p *pagePool) take(n int, short bool) []int32 {
	if p.needSort && short {
		p.merge()
	}
	if n <= 0 || n > len(p.free) {
		return nil
	}
	out := slices.Clone(p.free[:n])
	p.free = p.free[n:]
	p.nheld += n
	return out
}

// allocExtend is decode's prealloc of a request's prompt (alloc_extend with
// prefix 0 and bs 1): ceil(tokens/page_size) pages. At page size 1 decode
// calls the token allocator's alloc(tokens) instead
// (sgl-project/sglang disaggregation/decode.py at 0035ca42,
// alloc_for_decode_prealloc: "if allocator.page_size == 1: kv_loc =
// allocator.alloc(delta_len)"), which merges release_pages only when
// free_pages cannot hold the request (mem_cache/allocator.py at 02e29cb1,
// TokenToKVPoolAllocator.alloc: "if self.need_sort and need_size >
// len(self.free_pages)").
func (p *pagePool) allocExtend(tokens int) []int32 {
	n := (tokens + p.pageSize - 1) / p.pageSize
	if p.pageSize == 1 {
		return p.take(n, n > len(p.free))
	}
	return p.take(n, tokens/p.pageSize+1+1 > len(p.free))
}

// allocDecode is one request's new page in a decode step of batch size bs.
func (p *pagePool) allocDecode(bs int) []int32 {
	return p.take(1, bs > len(p.free))
}

// release is free(): unique page ids, onto release_pages (need_sort) or in
// front of free_pages.
func (p *pagePool) release(pages []int32) {
	if len(pages) == 0 {
		return
	}
	u := slices.Clone(pages)
	slices.Sort(u)
	u = slices.Compact(u)
	p.nheld -= len(u)
	if p.needSort {
		// Order on release_pages does not matter: the merge sorts.
		p.released = append(p.released, u...)
		return
	}
	p.free = append(u, p.free...)
}

func (p *pagePool) used() int { return p.nheld }

// write records seq as the last writer of pages.
func (p *pagePool) write(pages []int32, seq uint32, tenant uint16, output bool) {
	w := pageWrite{writer: seq, tenant: tenant, output: output}
	for _, pg := range pages {
		p.last[pg] = w
	}
}

// grower is a running request whose generated output crosses page
// boundaries: decode allocates one page (alloc_decode) each time the next
// token's position starts a new page; nothing is reserved up front.
type grower struct {
	at     int64 // time of the next page boundary
	every  int64 // time per token
	next   int   // token position of the next page boundary
	last   int   // last position written
	r      *request
	tenant uint16
	gen    int // r.growGen when scheduled; a retraction makes it stale
}

type growHeap []*grower

func (h growHeap) Len() int           { return len(h) }
func (h growHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h growHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *growHeap) Push(x any)        { *h = append(*h, x.(*grower)) }
func (h *growHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// startGrowth registers r's decode from firstAt: token i (1-based, the
// first comes with the transfer) is fed at firstAt + i*every and occupies
// position prompt+i-1; the last sampled token is never fed.
func (p *pagePool) startGrowth(r *request, firstAt, every int64, tenant uint16) {
	if r.completion < 2 {
		return
	}
	next := (r.prompt + p.pageSize - 1) / p.pageSize * p.pageSize
	last := r.prompt + r.completion - 2
	if next > last {
		return
	}
	g := &grower{every: every, next: next, last: last, r: r, tenant: tenant, gen: r.growGen}
	g.at = firstAt + int64(next-r.prompt+1)*every
	heap.Push(&p.growing, g)
}

// advance runs every page-boundary crossing due by t, in time order, so
// the pool sees decode growth interleaved with preallocs and frees.
func (p *pagePool) advance(t int64) {
	for len(p.growing) > 0 && p.growing[0].at <= t {
		g := p.growing[0]
		r := g.r
		if r.freed || r.done || r.pages == nil || g.gen != r.growGen {
			heap.Pop(&p.growing)
			continue
		}
		pg := p.allocDecode(max(1, len(p.growing)))
		if pg != nil {
			r.pages = append(r.pages, pg...)
			p.write(pg, r.seq, g.tenant, true)
		}
		g.next += p.pageSize
		if g.next > g.last || pg == nil {
			heap.Pop(&p.growing)
			continue
		}
		g.at += int64(p.pageSize) * g.every
		heap.Fix(&p.growing, 0)
	}
}
