package live

// pool is a decode node's paged KV pool, reduced to what the leak needs:
// pages hold the tokens (words) last written into them and who wrote them,
// and freed pages are reused last-freed-first, as SGLang's free list does
// for a page freed and reallocated within a short time. Page 0 is reserved
// (SGLang's padding page) and never handed out.
type pool struct {
	pageSize int
	pages    []page
	free     []int
}

type page struct {
	words  []string
	writer string // request id of the last write; "" = never written
}

func newPool(tokens, pageSize int) *pool {
	n := tokens/pageSize + 1
	p := &pool{pageSize: pageSize, pages: make([]page, n)}
	for i := n - 1; i >= 1; i-- {
		p.free = append(p.free, i)
	}
	return p
}

// alloc takes ceil(tokens/pageSize) pages, or reports false if the pool
// cannot hold them.
func (p *pool) alloc(tokens int) ([]int, bool) {
	n := (max(tokens, 1) + p.pageSize - 1) / p.pageSize
	if n > len(p.free) {
		return nil, false
	}
	out := make([]int, n)
	for i := range out {
		out[i] = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
	}
	return out, true
}

// write stores words into pages from the first, pageSize per page.
func (p *pool) write(pages []int, words []string, writer string) {
	for i, pg := range pages {
		lo := i * p.pageSize
		if lo >= len(words) {
			break
		}
		hi := min(lo+p.pageSize, len(words))
		p.pages[pg] = page{words: append([]string(nil), words[lo:hi]...), writer: writer}
	}
}

// read returns what attention over pages sees, and whether any page held
// another request's data (a stale read).
func (p *pool) read(pages []int, reader string) (words []string, stale bool) {
	for _, pg := range pages {
		pp := p.pages[pg]
		if pp.writer != "" && pp.writer != reader {
			stale = true
		}
		words = append(words, pp.words...)
	}
	return words, stale
}

// release returns pages to the free list (last freed is reused first).
func (p *pool) release(pages []int) {
	for i := len(pages) - 1; i >= 0; i-- {
		p.free = append(p.free, pages[i])
	}
}
