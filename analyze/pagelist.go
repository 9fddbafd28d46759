package analyze

// span is the pages first, first+1, ..., first+n-1.
type span struct{ first, n int32 }

// pageList is a list of pages in its order, as runs of consecutive
// pages. The replay's page lists (a request's pages, release_pages, what
// an allocation takes) were a page each: at SGLang's default page size of
// one token a prompt is thousands of pages, and writing them out, copying
// them to release_pages and merging them back into the free set one by one
// was most of a replay's time. Taken from the sorted free set, a prompt is
// a few runs; a list without long runs (decode growth interleaved with
// other requests', a pool without need_sort) costs two words a page
// instead of one.
type pageList []span

// count is the number of pages in l.
func (l pageList) count() int {
	n := 0
	for _, s := range l {
		n += int(s.n)
	}
	return n
}

// appendRun appends pages first..first+n-1, joined to l's last run when
// they follow it.
func (l pageList) appendRun(first, n int32) pageList {
	if n <= 0 {
		return l
	}
	if k := len(l) - 1; k >= 0 && l[k].first+l[k].n == first {
		l[k].n += n
		return l
	}
	return append(l, span{first, n})
}

// appendPage appends page q.
func (l pageList) appendPage(q int32) pageList { return l.appendRun(q, 1) }

// head is l's first page (0 when l is empty).
func (l pageList) head() int32 {
	if len(l) == 0 {
		return 0
	}
	return l[0].first
}

// pages is l a page at a time (tests, and pools that keep a list a page
// at a time).
func (l pageList) pages() []int32 {
	out := make([]int32, 0, l.count())
	for _, s := range l {
		for q := s.first; q < s.first+s.n; q++ {
			out = append(out, q)
		}
	}
	return out
}

// listOf is pages as a pageList.
func listOf(pages ...int32) pageList {
	var l pageList
	for _, q := range pages {
		l = l.appendPage(q)
	}
	return l
}
