package simulate

import "math/bits"

// pagePool is one DP rank's paged KV pool. SGLang's PagedTokenToKVPoolAllocator
// keeps free_pages sorted in PD mode (need_sort: released pages are merged and
// sorted before reuse) and hands out the head of the list, so the lowest free
// page indices are reused first. A bitset with lowest-first scanning gives
// the same order without a sort. Page 0 is reserved as SGLang's padding page.
//
// writer/tenant remember which request last wrote each page (0 = never since
// boot); the truth builder reads them when a request reads stale pages.
type pagePool struct {
	numPages int
	free     []uint64 // bit set = page free
	nfree    int
	writer   []uint32 // seq of the last writer, 0 = never written
	tenant   []uint16
}

func newPagePool(numPages int) *pagePool {
	p := &pagePool{numPages: numPages}
	p.free = make([]uint64, (numPages+1+63)/64)
	p.writer = make([]uint32, numPages+1)
	p.tenant = make([]uint16, numPages+1)
	for i := 1; i <= numPages; i++ {
		p.free[i>>6] |= 1 << (uint(i) & 63)
	}
	p.nfree = numPages
	return p
}

// alloc returns the n lowest free pages, or nil if the pool cannot hold them.
func (p *pagePool) alloc(n int) []int32 {
	if n <= 0 || n > p.nfree {
		return nil
	}
	out := make([]int32, 0, n)
	for w := 0; w < len(p.free) && len(out) < n; w++ {
		for p.free[w] != 0 && len(out) < n {
			b := bits.TrailingZeros64(p.free[w])
			p.free[w] &^= 1 << uint(b)
			out = append(out, int32(w*64+b))
		}
	}
	p.nfree -= n
	return out
}

// release returns pages to the pool. Releasing an already free page is a
// bug in the caller; it is ignored so counts stay consistent.
func (p *pagePool) release(pages []int32) {
	for _, pg := range pages {
		w, b := pg>>6, uint(pg)&63
		if p.free[w]&(1<<b) == 0 {
			p.free[w] |= 1 << b
			p.nfree++
		}
	}
}

func (p *pagePool) used() int { return p.numPages - p.nfree }

// write records seq as the last writer of pages.
func (p *pagePool) write(pages []int32, seq uint32, tenant uint16) {
	for _, pg := range pages {
		p.writer[pg] = seq
		p.tenant[pg] = tenant
	}
}
