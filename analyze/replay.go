package analyze

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"
)

// Allocator replay: without page-level events, a decode rank's page
// contents are estimated by replaying its KV allocator from the engine's
// own Receive/Finish lines, one lane (decode node, DP rank, boot) at a
// time. The semantics are SGLang's PagedTokenToKVPoolAllocator as read
// from its source (docs/analyzers.md, "Exposure"):
//
//   - free_pages is an ordered list, allocations take its head;
//   - with need_sort (0.4.10-0.5.1 always; 0.5.2+ when the disaggregation
//     mode is prefill or decode) freed pages wait on release_pages and are
//     merged into free_pages, sorted, only when an allocation finds
//     free_pages short: alloc_extend when tokens/page_size + bs + 1 >
//     len(free_pages), alloc_decode when bs > len(free_pages);
//   - without it (before 0.4.10, or non-PD) freed pages go to the front;
//   - decode preallocates the prompt's pages when it takes the request and
//     one more page each time generation crosses a page boundary; all of
//     the request's pages are freed at finish, abort or transfer failure.
//
// The logs do not fix every order: lines of the same second (second-granular
// log styles) are replayed both ways, and a victim's possible writers are
// the union over both replays plus the pages next to its allocation in the
// free list (growth times are interpolated between Receive and Finish).
// Writers found under every order are "likely"; the rest "possible".

// replaySlack is how many free-list positions either side of a victim's
// allocation count as possible: decode growth is placed by interpolating
// between Receive and Finish, which can shift the victim's position by a
// few pages.
const replaySlack = 8

// waitingTimeout is how long a decode request waits for KV before SGLang
// fails it (SGLANG_DISAGGREGATION_WAITING_TIMEOUT, 300 s by default).
const waitingTimeout = 300 * time.Second

// rreq is one decode-side request in a lane. The replay holds one per
// request of a lane over the window (page records name them), so it is
// kept small: the lines it needs are its first (the Receive) and its last
// (the Finish).
type rreq struct {
	room        uint64
	recv, fin   time.Time
	prompt      int
	completion  int
	finished    bool
	ownWrites   bool
	placeholder bool
	gaveUp      bool // the lane stopped waiting for its Finish (replayHorizon)
	// What the replay is asked about its room (replayAsk.writers, holders
	// and of), looked up once when it joins its lane rather than at every
	// page it takes: at a page size of one token, once per output token.
	wanted, asked, of bool
	ri                int32  // index in the lane's requests (compacting changes it)
	first, last       uint64 // lines
	growth            int    // decode pages the replay will add
}

// ask looks up what the replay is asked about r's room.
func (r *rreq) ask(a *replayAsk) {
	r.wanted, r.asked, r.of = a.writers[r.room], a.holders.has(r.room), a.of[r.room]
}

// SourcePages is what one writer room had last written in pages a victim
// read: prompt pages (its transferred KV) and output pages (decode growth).
type SourcePages struct {
	Prompt, Output int
	Lines          []uint64
}

// VictimReplay is the replayed lineage of one victim's prompt pages.
type VictimReplay struct {
	Room     uint64
	Node     string
	Rank     int16
	Boot     string
	PageSize int
	// Likely: writers under every replayed order; Possible: writers under
	// some order or next to the victim's pages in the free list.
	Likely   map[uint64]*SourcePages
	Possible map[uint64]*SourcePages
	// Uncertain names what weakens the replay (same-second orders, unknown
	// output lengths, completeness gaps).
	Uncertain []string
	Lines     []uint64
}

// replayAsk is what a replay is asked. Victims (writers) get their
// lineage: the writers of the pages they read, with page counts and lines.
// Abort candidates (holders) get less: which of the rooms in of (the
// aborted ones) held one of the pages the candidate was given, or the next
// pages in the free list, before it under some order. A room that wrote
// nothing of its own (aborted mid-transfer) is found that way and never as
// a writer. The two are kept apart because candidates outnumber victims by
// far (about 550,000 at 10M requests), and a lineage per candidate was
// most of what the replay held.
type replayAsk struct {
	writers map[uint64]bool
	holders rooms
	of      map[uint64]bool
}

// rooms is a set of rooms as a sorted list without repeats: the abort
// candidates asked about, which grow with the window, in 8 bytes each
// where a map took about 19, and twice that as it grew (24 MiB of the
// scale-100 analysis's peak, in abort_reuse's replay).
type rooms []uint64

// roomsOf sorts l and drops its repeats, in place.
func roomsOf(l []uint64) rooms {
	slices.Sort(l)
	return slices.Compact(l)
}

func (s rooms) has(r uint64) bool {
	_, ok := slices.BinarySearch(s, r)
	return ok
}

// replayAnswer is a replay's answer: a lineage per victim asked about, and
// per candidate asked about the rooms of ask.of that held its pages
// (sorted; present and empty when none did, absent when the candidate was
// not replayed).
type replayAnswer struct {
	lineage map[uint64]*VictimReplay
	held    map[uint64][]uint64
}

func newReplayAnswer() replayAnswer {
	return replayAnswer{lineage: map[uint64]*VictimReplay{}, held: map[uint64][]uint64{}}
}

// needSort says whether a boot's allocator sorts released pages (see the
// package comment above and docs/analyzers.md for the versions).
func needSort(b *Boot) bool {
	v := parseVersion(b.Version)
	switch {
	case v == [3]int{}:
		return true // unknown version: the PD default of every recent release
	case less(v, [3]int{0, 4, 10}):
		return false
	case less(v, [3]int{0, 5, 2}):
		return true
	}
	m := strings.ToLower(b.Mode)
	return m == "decode" || m == "prefill" || b.Role == "decode" || b.Role == "prefill"
}

func parseVersion(s string) [3]int {
	var v [3]int
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	for i, p := range strings.SplitN(s, ".", 3) {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		v[i] = n
	}
	return v
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// op is one allocator operation of a lane. It names its request by index
// in the lane (no pointer: the garbage collector does not scan the ops,
// which are most of the replay's memory).
type op struct {
	at   int64
	line uint64
	ri   int32 // index of the request in the lane
	kind uint8 // opPrealloc, opGrow, opFree
}

const (
	opPrealloc uint8 = iota
	opGrow
	opFree
)

func mergeSource(m map[uint64]*SourcePages, w uint64, s *SourcePages) {
	d := m[w]
	if d == nil {
		d = &SourcePages{}
		m[w] = d
	}
	d.Prompt = max(d.Prompt, s.Prompt)
	d.Output = max(d.Output, s.Output)
	for _, l := range s.Lines {
		if !slices.Contains(d.Lines, l) {
			d.Lines = append(d.Lines, l)
		}
	}
}

// sortOps orders a lane's operations by time; inside one instant (one log
// second when lines are second-granular) frees come first and lines in
// file order, or, reversed, allocations first and lines in reverse order.
// The sort is stable (operations equal in all of that keep their order)
// and takes the first sorted of ops as already in order: a lane's pending
// operations are what its last flush left, in order, and what came
// since. slices.SortStableFunc, which this replaces, merges in place in
// O(n log² n) moves and sorted everything pending again at each flush:
// half of a replay's time at SGLang's default page size of one token,
// where a request has an operation per output token. buf is scratch.
func sortOps(ops []op, sorted int, reversed bool, buf *[]op) {
	sortStableOps(ops[sorted:], reversed, buf)
	if sorted == 0 || sorted == len(ops) || !opLess(&ops[sorted], &ops[sorted-1], reversed) {
		return
	}
	mergeSortedOps(ops, sorted, reversed, buf)
}

// opLess is the order sortOps sorts by: opFwdLess, inlined in the sort's
// loops (through a function value each comparison was a call, a third of
// a replay's time at a page size of one token), or for second-granular
// lanes' reversed replay opReversed, a call.
func opLess(a, b *op, reversed bool) bool {
	if reversed {
		return opReversed(*a, *b) < 0
	}
	return opFwdLess(a, b)
}

func opFwdLess(a, b *op) bool {
	return a.at < b.at || a.at == b.at && (a.kind > b.kind || a.kind == b.kind && a.line < b.line)
}

// opReversed is the reversed order as a comparison.
func opReversed(a, b op) int {
	if ta, tb := a.at/int64(time.Second), b.at/int64(time.Second); ta != tb {
		return cmp.Compare(ta, tb)
	}
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	if a.at != b.at {
		return cmp.Compare(a.at, b.at)
	}
	return cmp.Compare(b.line, a.line)
}

// sortStableOps is a stable merge sort of s: insertion-sorted runs, then
// merges through buf, O(n log n) moves.
func sortStableOps(s []op, reversed bool, buf *[]op) {
	const run = 24
	n := len(s)
	for lo := 0; lo < n; lo += run {
		r := s[lo:min(lo+run, n)]
		for i := 1; i < len(r); i++ {
			x := r[i]
			j := i
			for ; j > 0 && (!reversed && opFwdLess(&x, &r[j-1]) || reversed && opReversed(x, r[j-1]) < 0); j-- {
				r[j] = r[j-1]
			}
			r[j] = x
		}
	}
	if n <= run {
		return
	}
	if cap(*buf) < n {
		*buf = make([]op, n)
	}
	src, dst := s, (*buf)[:n]
	for width := run; width < n; width *= 2 {
		for lo := 0; lo < n; lo += 2 * width {
			mid, hi := min(lo+width, n), min(lo+2*width, n)
			mergeOps(src[lo:mid], src[mid:hi], dst[lo:hi], reversed)
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

// mergeOps writes the stable merge of sorted a and b (a first on ties) to
// out, which has room for both and does not overlap a. out may end with b
// itself (a merge in place): while a is not exhausted the next write,
// out[i+j], lies below b[j]'s place, out[len(a)+j].
func mergeOps(a, b, out []op, reversed bool) {
	if len(a) > 0 && len(b) > 0 && !opLess(&b[0], &a[len(a)-1], reversed) {
		copy(out, a)
		copy(out[len(a):], b)
		return
	}
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if !reversed && opFwdLess(&b[j], &a[i]) || reversed && opReversed(b[j], a[i]) < 0 {
			out[k] = b[j]
			j++
		} else {
			out[k] = a[i]
			i++
		}
		k++
	}
	k += copy(out[k:], a[i:])
	copy(out[k:], b[j:])
}

// mergeSortedOps merges s[:mid] and s[mid:], both sorted, in place (the
// first on ties), through buf.
func mergeSortedOps(s []op, mid int, reversed bool, buf *[]op) {
	if cap(*buf) < mid {
		*buf = make([]op, mid)
	}
	a := (*buf)[:mid]
	copy(a, s[:mid])
	mergeOps(a, s[mid:], s, reversed)
}

// lanePool is the replay's own model of one rank's allocator (written from
// SGLang's source, independently of simulate/allocator.go, so that the two
// cannot agree on a shared mistake).
//
// With need_sort, free_pages is always sorted: a merge sorts it and
// allocations only take its head. So it is the set of free pages not on
// release_pages, handed out lowest first — a bitset, where a merge is
// setting the released pages' bits (no sort of the whole pool). Without
// need_sort, free_pages is a list with freed pages put in front, stored
// reversed (head last) so that both ends are appends and truncations.
//
// At a page size of one token SGLang allocates with another class,
// TokenToKVPoolAllocator (model_runner_kv_cache_mixin.py: "if
// self.page_size == 1"), whose rules differ in two places: alloc merges
// release_pages only when the request needs more than free_pages holds
// (no "+ bs + 1" of alloc_extend), and without need_sort free() appends
// the freed slots at the end of free_pages, in the request's order, where
// the paged allocator puts them in front (sgl-project/sglang
// python/sglang/srt/mem_cache/allocator.py at 02e29cb1,
// disaggregation/decode.py at 0035ca42: "if allocator.page_size == 1:
// kv_loc = allocator.alloc(delta_len)"). token marks that class; its
// list is then free_pages in order, from head.
type lanePool struct {
	ps       int
	needSort bool
	token    bool     // page size 1: TokenToKVPoolAllocator
	bits     []uint64 // need_sort: free_pages as a set
	nbits    int
	lo       int      // lowest word that may hold a set bit
	list     []int32  // no need_sort: free_pages, reversed (head last); token: in order from head
	head     int      // token, no need_sort: where free_pages starts in list
	released pageList // release_pages (need_sort)
	nrel     int      // len(release_pages), in pages
	// pages holds each page's last decode-growth write; the claim piece
	// that took a page since (0: none, the record is the page's state)
	// is blk's entry for its block of blockPages pages, or pieceOf's
	// for the page when that entry is mixed (see pieceAt); pieces are
	// the claims (see claim).
	pages   []pageState
	blk     []uint32
	pieceOf []uint32
	pieces  []piece
	derived [4][2]uint32 // claim's recent (old piece, new piece) pairs
	// dirty is one past the highest page whose record or piece was
	// written: the records above it are still zero, and only the records
	// below it need clearing for the next lane. With need_sort the
	// allocator hands out the lowest free pages (the rules above), so a
	// lane whose load never filled its pool wrote only a prefix; in any
	// order the bound holds.
	dirty int32
	reqs  []*rreq    // the lane's requests, which records and pieces index
	held  []pageList // pages each request of the lane holds, by index
	holds []bool     // whether it holds pages (it may hold none)
	buf   pageList   // scratch for next(k, false)
	sbuf  []int32    // scratch for release
	// lists are page lists of freed requests, kept for the next takes:
	// lists[c] holds lists of capacity at least 1<<c runs. A lane
	// allocates and frees one per request, and allocating them afresh was
	// an eighth of everything a scale-20 analysis allocated (2.8 of 24.7
	// GB, when a list held a page per entry).
	lists [32][]pageList
	// kept is the runs lists can hold in all; at most keepMax, so what
	// waits for reuse stays the size of the pool whatever the lane's
	// history (a run takes two words where a page took one: half as many
	// as the pages a list of pages could hold).
	kept, keepMax int
}

// pageState is a page's last write by decode growth: the request that
// wrote it (its index in the lane plus one, 0 = none, | outBit: growth
// writes output) and the write before it. Growth makes the request the
// page's holder too. A prompt's claim does not write the record (see
// claim): a page's record and its piece together are its state, the
// request it was last handed to (holder), its last write and the write
// before. Requests are named by index, not room, so a record is 8 bytes
// and a piece id 4: a lane holds both for each page of its pool in each
// order it replays, so at a page size of one token they are most of a
// replay's memory (3,145,728 pages a rank: 38 MB).
type pageState struct {
	w     uint32 // request that last grew into the page, | outBit
	prevW uint32 // the write before that growth
}

// piece is one claim of a run of pages (a prompt's, or the part of it the
// request does not write) over what the pages held before, which it names
// as an expression per field (before1 the write before the claim, before2
// the one before that): a write, or recW / recPrevW, the page's record.
// While a page is a piece's, its record does not change (growth takes the
// page back from the piece), so the expression's value is fixed per page.
// A claim of pages whose pieces share an expression (a prompt is a run or
// a few, taken from what one or a few claims left) writes one piece id a
// page, where a record a page took three fields read and written: at a
// page size of one token a prompt is some 20,000 pages, and those records
// were most of a replay's time.
type piece struct {
	holder           int32  // the claiming request, its index plus one
	own              bool   // it wrote its prompt into the pages
	before1, before2 uint32 // before2 is 0 in an own piece: nothing reads it
}

// recW and recPrevW, as a piece's before1 or before2, stand for the
// page's record's w and prevW. No request index reaches them (compaction
// keeps a lane's requests far below 1<<31).
const (
	recW     uint32 = 1<<31 - 1
	recPrevW uint32 = 1<<31 - 2
)

func (r pageState) eval(x uint32) uint32 {
	switch x {
	case recW:
		return r.w
	case recPrevW:
		return r.prevW
	}
	return x
}

// A claim names its pieces a block of blockPages pages at a time where
// every page of the block is in one piece, and a page at a time only in
// blocks whose pages differ (mixed). A claim at a page size of one token
// is mostly one run of some 20,000 pages (96,236 runs in 94,762 claims
// over a scale-1 incident, 99% of the whole blocks claimed already in one
// piece), so it writes an id a block instead of a page: the id a page
// was most of the replay's memory traffic. Growth, a page at a time,
// splits the block it lands in; its pages are mostly next to each other
// (785,113 splits for 47.0 million growth steps over that incident).
const (
	blockShift = 6
	blockPages = 1 << blockShift
	mixed      = ^uint32(0)
)

// pieceAt is the piece page q is in (0: none).
func (p *lanePool) pieceAt(q int32) uint32 {
	if k := p.blk[q>>blockShift]; k != mixed {
		return k
	}
	return p.pieceOf[q]
}

// split gives block b's pages their piece a page at a time.
func (p *lanePool) split(b int32) {
	if k := p.blk[b]; k != mixed {
		ids := p.pieceOf[b<<blockShift:][:blockPages]
		for i := range ids {
			ids[i] = k
		}
		p.blk[b] = mixed
	}
}

// settle makes block b one piece again when its pages are in one.
func (p *lanePool) settle(b int32) {
	ids := p.pieceOf[b<<blockShift:][:blockPages]
	for _, k := range ids[1:] {
		if k != ids[0] {
			return
		}
	}
	p.blk[b] = ids[0]
}

// state is page q's holder, last write and the write before it.
func (p *lanePool) state(q int32) (holder int32, w, prevW uint32) {
	r := p.pages[q]
	k := p.pieceAt(q)
	if k == 0 {
		return int32(r.w &^ outBit), r.w, r.prevW
	}
	c := &p.pieces[k]
	if c.own {
		return c.holder, written(c.holder, false), r.eval(c.before1)
	}
	return c.holder, r.eval(c.before1), r.eval(c.before2)
}

// holder is state's holder alone.
func (p *lanePool) holder(q int32) int32 {
	if k := p.pieceAt(q); k != 0 {
		return p.pieces[k].holder
	}
	return int32(p.pages[q].w &^ outBit)
}

// outBit marks a write of generated output (a lane holds far fewer than
// 1<<31 requests: compaction keeps them to the pool's pages and flights).
const outBit = 1 << 31

func written(i int32, output bool) uint32 {
	if output {
		return uint32(i) | outBit
	}
	return uint32(i)
}

// writerOf and isOut split a write into its request and whether it was
// output.
func writerOf(w uint32) int32 { return int32(w &^ outBit) }
func isOut(w uint32) bool     { return w&outBit != 0 }

// pageStates recycles the per-page records between lanes and orders: a
// lane of a large pool needs megabytes of them, and allocating them afresh
// for each made the collector run (and scan the whole dataset) more often.
var pageStates sync.Pool

// pageBuf is a recycled set of record and piece-id slices; from dirty on
// the records and blocks are zero (a page's own piece id is read only in
// a mixed block, which split wrote first).
type pageBuf struct {
	recs         []pageState
	blk, pieceOf []uint32
	dirty        int32
}

// blocks is how many blocks cover pages 0..n-1.
func blocks(n int) int { return (n + blockPages - 1) >> blockShift }

func newLanePool(n, ps int, sorted bool) *lanePool {
	var pages []pageState
	var blk, pieceOf []uint32
	nb := blocks(n + 1)
	if b, ok := pageStates.Get().(*pageBuf); ok && cap(b.recs) >= n+1 && cap(b.blk) >= nb && cap(b.pieceOf) >= nb*blockPages {
		// Only what the last lane wrote: clearing a whole pool's records
		// for each lane was an eighth of an analysis at a page size of
		// one token.
		clear(b.recs[:b.dirty])
		clear(b.blk[:blocks(int(b.dirty))])
		pages, blk, pieceOf = b.recs[:n+1], b.blk[:nb], b.pieceOf[:nb*blockPages]
	} else {
		pages, blk, pieceOf = make([]pageState, n+1), make([]uint32, nb), make([]uint32, nb*blockPages)
	}
	p := &lanePool{ps: ps, needSort: sorted, token: ps == 1, pages: pages, blk: blk, pieceOf: pieceOf,
		pieces: make([]piece, 1, 64), keepMax: n + 512}
	if sorted {
		// Pages 1..n free, a word at a time (page 0 is SGLang's padding).
		p.bits = make([]uint64, (n+1+63)/64)
		for w := range p.bits {
			p.bits[w] = ^uint64(0)
		}
		p.bits[0] &^= 1
		if r := (n + 1) & 63; r != 0 {
			p.bits[len(p.bits)-1] &= 1<<uint(r) - 1
		}
		p.nbits = n
		return p
	}
	p.list = make([]int32, n)
	for i := range p.list {
		p.list[i] = int32(n - i) // reversed: page 1 last, at the head
		if p.token {
			p.list[i] = int32(i + 1) // in order: page 1 first, at the head
		}
	}
	return p
}

// nfree is len(free_pages).
func (p *lanePool) nfree() int {
	if p.needSort {
		return p.nbits
	}
	return len(p.list) - p.head
}

// next returns up to k pages from the head of free_pages, head first,
// removing them when take is set; the list has room for spare more runs.
func (p *lanePool) next(k int, take bool, spare int) pageList {
	k = min(k, p.nfree())
	var out pageList
	if take {
		out = p.newList(spare + 1)
	} else {
		out = p.buf[:0] // a peek: valid until the next peek
	}
	if !p.needSort {
		if p.token {
			for _, q := range p.list[p.head : p.head+k] {
				out = out.appendPage(q)
			}
		} else {
			for i := 0; i < k; i++ {
				out = out.appendPage(p.list[len(p.list)-1-i])
			}
		}
		switch {
		case !take:
			p.buf = out
		case p.token:
			p.head += k
			p.trim()
		default:
			p.list = p.list[:len(p.list)-k]
		}
		return out
	}
	// The set's lowest k pages, a run of set bits at a time: at a page
	// size of one token a prompt takes thousands, most in whole words.
	got := 0
	for w := p.lo; w < len(p.bits) && got < k; w++ {
		word := p.bits[w]
		for word != 0 && got < k {
			b := bits.TrailingZeros64(word)
			run := min(bits.TrailingZeros64(^(word >> uint(b))), k-got)
			out = out.appendRun(int32(w*64+b), int32(run))
			got += run
			word &^= onesFrom(b, run)
		}
		if take {
			p.bits[w] = word
			if word == 0 {
				p.lo = w + 1
			}
		}
	}
	if take {
		p.nbits -= got
	} else {
		p.buf = out
	}
	return out
}

// onesFrom is a word with bits b..b+n-1 set (b+n <= 64).
func onesFrom(b, n int) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return (1<<uint(n) - 1) << uint(b)
}

// trim drops the taken head of a token pool's free_pages once it is most
// of the list, so the list stays the size of the pool.
func (p *lanePool) trim() {
	if p.head > 1024 && p.head > len(p.list)/2 {
		n := copy(p.list, p.list[p.head:])
		p.list, p.head = p.list[:n], 0
	}
}

// newList is an empty page list with room for n runs, a freed one when
// one is large enough.
func (p *lanePool) newList(n int) pageList {
	c := bits.Len(uint(max(n, 1) - 1)) // 1<<c >= n
	if k := len(p.lists[c]); k > 0 {
		l := p.lists[c][k-1]
		p.lists[c][k-1] = nil
		p.lists[c] = p.lists[c][:k-1]
		p.kept -= cap(l)
		return l[:0]
	}
	return make(pageList, 0, 1<<c)
}

// recycle keeps l, a page list nothing refers to any more, for newList.
func (p *lanePool) recycle(l pageList) {
	if cap(l) == 0 || p.kept+cap(l) > p.keepMax {
		return
	}
	c := bits.Len(uint(cap(l))) - 1 // 1<<c <= cap(l)
	p.lists[c] = append(p.lists[c], l)
	p.kept += cap(l)
}

// mergeReleased is merge_and_sort_free: free_pages becomes the sorted
// union, a word of each released run at a time.
func (p *lanePool) mergeReleased() {
	lo, n := p.lo, 0
	for _, s := range p.released {
		lo = min(lo, int(s.first>>6))
		for q, end := int(s.first), int(s.first+s.n); q < end; {
			w, b := q>>6, q&63
			m := min(64-b, end-q)
			mask := onesFrom(b, m)
			old := p.bits[w]
			p.bits[w] = old | mask
			n += bits.OnesCount64(mask &^ old) // a page released twice counts once
			q += m
		}
	}
	p.lo, p.nbits = lo, p.nbits+n
	p.released, p.nrel = p.released[:0], 0
}

// take allocates n pages (nil when they do not fit); the list has room
// for spare more runs (the request's decode growth).
func (p *lanePool) take(n int, short bool, spare int) pageList {
	if p.needSort && short {
		p.mergeReleased()
	}
	if p.needSort && n > p.nfree() && p.nfree()+p.nrel >= n {
		// The prealloc queue waits for available_size(); by the time the
		// request is taken the pages have been merged.
		p.mergeReleased()
	}
	if n <= 0 || n > p.nfree() {
		return nil
	}
	return p.next(n, true, spare)
}

// takeOne is take(1, short, 0) without a list: alloc_decode's one page.
func (p *lanePool) takeOne(short bool) (int32, bool) {
	if !p.needSort {
		switch {
		case p.nfree() == 0:
			return 0, false
		case p.token:
			q := p.list[p.head]
			p.head++
			p.trim()
			return q, true
		}
		q := p.list[len(p.list)-1]
		p.list = p.list[:len(p.list)-1]
		return q, true
	}
	if short || (p.nbits == 0 && p.nrel > 0) {
		p.mergeReleased()
	}
	if p.nbits == 0 {
		return 0, false
	}
	for w := p.lo; w < len(p.bits); w++ {
		if word := p.bits[w]; word != 0 {
			b := bits.TrailingZeros64(word)
			p.bits[w] = word &^ (1 << uint(b))
			if p.bits[w] == 0 {
				p.lo = w + 1
			} else {
				p.lo = w
			}
			p.nbits--
			return int32(w*64 + b), true
		}
	}
	return 0, false
}

// claim hands pages to request ri and records it as the writer of its
// prompt in the first own of them. Each run of pages becomes the claim's
// pieces, one per expression of what the pages held before (mostly one
// a claim): a piece id written a page.
func (p *lanePool) claim(pages pageList, own int, ri int32) {
	p.derived = [4][2]uint32{}
	for _, s := range pages {
		p.dirty = max(p.dirty, s.first+s.n)
		k := int32(min(own, int(s.n)))
		p.claimRun(s.first, s.first+k, true, ri+1)
		p.claimRun(s.first+k, s.first+s.n, false, ri+1)
		own -= int(k)
	}
}

// claimRun claims pages [a, b) for holder, written into when own: a
// block in one piece at a time, the pages of the rest.
func (p *lanePool) claimRun(a, b int32, own bool, holder int32) {
	last, next := mixed, uint32(0)
	for a < b {
		blk := a >> blockShift
		end := min(b, (blk+1)<<blockShift)
		if k := p.blk[blk]; k != mixed {
			if end-a == blockPages {
				if k != last {
					last, next = k, p.derive(k, own, holder)
				}
				p.blk[blk] = next
				a = end
				continue
			}
			p.split(blk)
		}
		ids := p.pieceOf[a:end]
		for i, k := range ids {
			if k != last {
				last, next = k, p.derive(k, own, holder)
			}
			ids[i] = next
		}
		p.settle(blk)
		a = end
	}
}

// derive is the piece a claim by holder makes of pages that were piece
// old's (0: their records'): the same for every page of old, so it is made
// once per claim (derived keeps the claim's last few).
func (p *lanePool) derive(old uint32, own bool, holder int32) uint32 {
	key := old
	if own {
		key |= 1 << 31 // a claim's own and other pages differ
	}
	for _, d := range p.derived {
		if d[0] == key && d[1] != 0 {
			return d[1]
		}
	}
	c := piece{holder: holder, own: own, before1: recW, before2: recPrevW}
	if old != 0 {
		prev := &p.pieces[old]
		if prev.own {
			c.before1, c.before2 = written(prev.holder, false), prev.before1
		} else {
			c.before1, c.before2 = prev.before1, prev.before2
		}
	}
	if own {
		// An own piece's state is its write and the one before
		// (before1): what was two writes back is gone.
		c.before2 = 0
	}
	// Old pieces that differ only in what this claim forgets make the
	// same piece: one id for them, or a region would keep the
	// boundaries of every claim it ever had, a piece each.
	id := uint32(0)
	for _, d := range p.derived {
		if d[1] != 0 && p.pieces[d[1]] == c {
			id = d[1]
			break
		}
	}
	if id == 0 {
		id = uint32(len(p.pieces))
		p.pieces = append(p.pieces, c)
	}
	copy(p.derived[1:], p.derived[:3])
	p.derived[0] = [2]uint32{key, id}
	return id
}

// grow hands page q to request ri as its next decode page, which it
// writes output into: the page leaves its piece, if any.
func (p *lanePool) grow(q int32, ri int32) {
	var w uint32
	k := p.pieceAt(q)
	if k != 0 && p.pieces[k].own {
		// Mostly so: the record is not read, only written (its line
		// need not be waited for), where the piece ids around q are at
		// hand from the claims just before.
		w = written(p.pieces[k].holder, false)
	} else {
		_, w, _ = p.state(q)
	}
	p.pages[q] = pageState{w: written(ri+1, true), prevW: w}
	if k != 0 {
		b := q >> blockShift
		p.split(b)
		p.pieceOf[q] = 0
		if q&(blockPages-1) == blockPages-1 {
			// With need_sort growth takes the lowest free page: a
			// block whose last page it took is often all growth, in
			// no piece. (settle checks; in any order it is only a
			// chance to merge.)
			p.settle(b)
		}
	}
	p.dirty = max(p.dirty, q+1)
}

// refs calls page with every request a page's state names: its holder,
// last write and the write before (lane compaction keeps those).
func (p *lanePool) refs(page func(int32)) {
	for q := range p.dirty { // the rest are zero
		h, w, prev := p.state(q)
		page(h)
		page(writerOf(w))
		page(writerOf(prev))
	}
}

// renumber renames the requests the pages name after lane compaction
// (ref maps an index plus one to its new one, 0 for a request dropped),
// and drops the pieces no page is in. A record under a piece may name a
// dropped request: only the piece's expressions read it, and refs kept
// every request they evaluate to.
func (p *lanePool) renumber(ref func(int32) int32) {
	rename := func(w uint32) uint32 {
		if w == recW || w == recPrevW {
			return w
		}
		return written(ref(writerOf(w)), isOut(w))
	}
	ids := make([]uint32, len(p.pieces))
	nb := blocks(int(p.dirty))
	for b, k := range p.blk[:nb] {
		if k != mixed {
			ids[k] = 1 // in use
			continue
		}
		for _, k := range p.pieceOf[b<<blockShift:][:blockPages] {
			ids[k] = 1
		}
	}
	ids[0] = 0 // a page in no piece stays in none
	n := uint32(1)
	for k := 1; k < len(p.pieces); k++ {
		if ids[k] == 0 {
			continue
		}
		c := p.pieces[k]
		c.holder = ref(c.holder)
		c.before1, c.before2 = rename(c.before1), rename(c.before2)
		p.pieces[n], ids[k] = c, n
		n++
	}
	p.pieces = p.pieces[:n]
	for b, k := range p.blk[:nb] {
		if k != mixed {
			p.blk[b] = ids[k]
			continue
		}
		pg := p.pieceOf[b<<blockShift:][:blockPages]
		for i, k := range pg {
			pg[i] = ids[k]
		}
	}
	for q := range p.dirty {
		r := &p.pages[q]
		r.w, r.prevW = rename(r.w), rename(r.prevW)
	}
}

// tally adds the last writes of pages, but for the first skip, to m as
// addWriter does a page at a time. Neighbouring pages mostly share their
// last write (a request's pages are taken together), so a run of one
// write costs one lookup: a victim's prompt at a page size of one token
// is up to a pool of pages.
func (p *lanePool) tally(m map[uint64]*SourcePages, pages pageList, skip int, self uint64) {
	var (
		last  uint32
		s     *SourcePages
		begun bool
	)
	for _, run := range pages {
		if skip >= int(run.n) {
			skip -= int(run.n)
			continue
		}
		end := run.first + run.n
		for q := run.first + int32(skip); q < end; {
			// A block in one own piece is one write: counted at once.
			n := int32(1)
			var w uint32
			if k := p.pieceAt(q); k != 0 && p.pieces[k].own {
				w = written(p.pieces[k].holder, false) // no record to read
				if q&(blockPages-1) == 0 && end-q >= blockPages && p.blk[q>>blockShift] == k {
					n = blockPages
				}
			} else {
				_, w, _ = p.state(q)
			}
			if !begun || w != last {
				begun, last = true, w
				s = sourcePages(m, p.room(int32(w&^outBit)), p.line(int32(w&^outBit)), self)
			}
			switch {
			case s == nil:
			case w&outBit != 0:
				s.Output += int(n)
			default:
				s.Prompt += int(n)
			}
			q += n
		}
		skip = 0
	}
}

// room is the room of the request a pageState names (0 for none).
func (p *lanePool) room(i int32) uint64 {
	if i == 0 {
		return 0
	}
	return p.reqs[i-1].room
}

// req is the request a pageState names (nil for none).
func (p *lanePool) req(i int32) *rreq {
	if i == 0 {
		return nil
	}
	return p.reqs[i-1]
}

// line is the line a pageState's writer wrote with: its Receive line.
func (p *lanePool) line(i int32) uint64 {
	if i == 0 {
		return 0
	}
	return p.reqs[i-1].first
}

// release is free(): unique pages onto release_pages (need_sort), or in
// front of free_pages, lowest first (a token pool: at its end, as they
// come).
func (p *lanePool) release(pages pageList) {
	if p.needSort {
		// Order does not matter: the merge sorts (a request's pages are
		// distinct, so no duplicates either).
		p.released = append(p.released, pages...)
		p.nrel += pages.count()
		return
	}
	if p.token {
		for _, s := range pages {
			for q := s.first; q < s.first+s.n; q++ {
				p.list = append(p.list, q)
			}
		}
		return
	}
	u := p.sbuf[:0]
	for _, s := range pages {
		for q := s.first; q < s.first+s.n; q++ {
			u = append(u, q)
		}
	}
	slices.Sort(u)
	u = slices.Compact(u)
	for i := len(u) - 1; i >= 0; i-- {
		p.list = append(p.list, u[i])
	}
	p.sbuf = u
}

// runLane replays one order of a lane and returns, per victim asked
// about, the writers of its prompt pages (Likely) and of the free-list
// neighbours (Possible), and the laneRun's held answers.
func runLane(ops []op, reqs []*rreq, npages, ps int, sorted bool, ask *replayAsk) (map[uint64]*VictimReplay, map[uint64][]uint64) {
	lr := newLaneRun(npages, ps, sorted, ask)
	defer lr.close()
	for _, r := range reqs {
		r.ask(ask)
	}
	for _, o := range ops {
		lr.apply(reqs, o)
	}
	return lr.res, lr.held
}

// laneRun is one order of a lane's replay: the lane's allocator and what
// it found for the wanted rooms, fed the lane's operations in that order
// (all at once by runLane, or batch by batch as a stream delivers them).
type laneRun struct {
	p      *lanePool
	npages int
	ask    *replayAsk
	res    map[uint64]*VictimReplay
	held   map[uint64][]uint64 // holders asked about, as replayAnswer.held (unsorted)
	// running counts the requests holding pages; queue is the prealloc
	// queue: a request whose prompt does not fit waits, in arrival order,
	// until frees make room (decode.py pop_preallocated).
	running int
	queue   []op
}

func newLaneRun(npages, ps int, sorted bool, ask *replayAsk) *laneRun {
	return &laneRun{p: newLanePool(npages, ps, sorted), npages: npages, ask: ask,
		res: map[uint64]*VictimReplay{}, held: map[uint64][]uint64{}}
}

// close returns the page records for the next lane. Only the records go
// back (nothing returned points into them); a pointer to the pool's own
// field would keep the whole lane alive.
func (lr *laneRun) close() {
	pageStates.Put(&pageBuf{recs: lr.p.pages, blk: lr.p.blk, pieceOf: lr.p.pieceOf, dirty: lr.p.dirty})
	lr.p = nil
}

// apply replays one operation; reqs is the lane's requests so far (an
// operation names its request by index in it).
func (lr *laneRun) apply(reqs []*rreq, o op) {
	p := lr.p
	p.reqs = reqs
	if n := len(reqs) - len(p.held); n > 0 {
		p.held = append(p.held, make([]pageList, n)...)
		p.holds = append(p.holds, make([]bool, n)...)
	}
	if o.kind == opFree {
		// A request still queued when it finishes (aborted while
		// waiting) never got pages.
		lr.queue = slices.DeleteFunc(lr.queue, func(q op) bool { return q.ri == o.ri })
	}
	// Queued requests that never got pages are dropped after the
	// disaggregation waiting timeout (300 s, the KVPoll timeout).
	lr.queue = slices.DeleteFunc(lr.queue, func(q op) bool { return o.at-q.at > int64(waitingTimeout) })
	if o.kind == opPrealloc && (reqs[o.ri].prompt+p.ps-1)/p.ps > lr.npages {
		return // can never fit
	}
	if !lr.step(reqs, o) {
		lr.queue = append(lr.queue, o)
		return
	}
	if o.kind == opFree {
		lr.queue = slices.DeleteFunc(lr.queue, func(q op) bool { return lr.step(reqs, q) })
	}
}

// step applies one operation; false means a prealloc that does not fit
// yet (it waits in the queue).
func (lr *laneRun) step(reqs []*rreq, o op) bool {
	p, ps, res := lr.p, lr.p.ps, lr.res
	r := reqs[o.ri]
	switch o.kind {
	case opPrealloc:
		writers := r.wanted
		n := (r.prompt + ps - 1) / ps
		if n > p.nfree()+p.nrel {
			return false
		}
		// alloc_extend merges when extend_num_tokens // page_size + bs +
		// 1 > len(free_pages); the token allocator's alloc only when the
		// request needs more than that (take's own check).
		pg := p.take(n, !p.token && r.prompt/ps+2 > p.nfree(), r.growth)
		if pg == nil {
			return false
		}
		if r.asked {
			lr.noteHolders(r.room, pg)
		}
		p.held[o.ri], p.holds[o.ri] = pg, true
		lr.running++
		if writers {
			vr := &VictimReplay{Room: r.room, Likely: map[uint64]*SourcePages{}, Possible: map[uint64]*SourcePages{},
				Lines: []uint64{o.line}}
			skip := 0
			if r.placeholder {
				skip = 1
			}
			p.tally(vr.Likely, pg, skip, r.room)
			// The next pages in the free list: the victim's under a
			// slightly later position.
			p.tally(vr.Possible, p.next(replaySlack, false, 0), 0, r.room)
			res[r.room] = vr
		}
		// The request holds its pages and writes its prompt into them
		// (a placeholder only its first page), in one pass over them.
		own := n
		switch {
		case !r.ownWrites:
			own = 0
		case r.placeholder:
			own = min(own, 1)
		}
		p.claim(pg, own, o.ri)
		if writers {
			// Pages handed out just before the victim could have been
			// its own under a slightly different order.
			markRecentNeighbours(p, res[r.room], r.room, pg)
		}
	case opGrow:
		pg := p.held[o.ri]
		if !p.holds[o.ri] {
			return true
		}
		q, ok := p.takeOne(max(lr.running, 1) > p.nfree())
		if !ok {
			return true
		}
		if r.asked {
			if hs, ok := lr.held[r.room]; ok {
				if h := p.req(p.holder(q)); h != nil && h.room != r.room && h.of && !slices.Contains(hs, h.room) {
					lr.held[r.room] = append(hs, h.room)
				}
			}
		}
		p.grow(q, o.ri)
		p.held[o.ri] = pg.appendPage(q)
	case opFree:
		if p.holds[o.ri] {
			p.release(p.held[o.ri])
			p.recycle(p.held[o.ri])
			p.held[o.ri], p.holds[o.ri] = nil, false
			lr.running--
		}
	}
	return true
}

// noteHolders records which rooms asked about held pages pg (just taken
// by room), or the next pages in the free list (the room's under a
// slightly later position), before it.
func (lr *laneRun) noteHolders(room uint64, pg pageList) {
	p := lr.p
	hs := []uint64{} // present even when empty: the room was replayed
	last := int32(-1)
	add := func(q int32) {
		// Pages come in runs of one holder: look each run up once.
		i := p.holder(q)
		if i == last {
			return
		}
		last = i
		if h := p.req(i); h != nil && h.room != room && h.of && !slices.Contains(hs, h.room) {
			hs = append(hs, h.room)
		}
	}
	for _, s := range pg {
		for q := s.first; q < s.first+s.n; q++ {
			add(q)
		}
	}
	for _, s := range p.next(replaySlack, false, 0) {
		for q := s.first; q < s.first+s.n; q++ {
			add(q)
		}
	}
	lr.held[room] = hs
}

// markRecentNeighbours adds, as possible writers, what the pages just
// below the victim's first page held before and after their latest write:
// under a slightly different order they could have been the victim's.
func markRecentNeighbours(p *lanePool, vr *VictimReplay, victim uint64, own pageList) {
	if len(own) == 0 {
		return
	}
	lo := own.head()
	for q := max(int32(1), lo-replaySlack); q < lo; q++ {
		_, w, prev := p.state(q)
		addWriter(vr.Possible, p.room(writerOf(prev)), isOut(prev), p.line(writerOf(prev)), victim)
		addWriter(vr.Possible, p.room(writerOf(w)), isOut(w), p.line(writerOf(w)), victim)
	}
}

func addWriter(m map[uint64]*SourcePages, w uint64, output bool, line uint64, self uint64) {
	s := sourcePages(m, w, line, self)
	switch {
	case s == nil:
	case output:
		s.Output++
	default:
		s.Prompt++
	}
}

// sourcePages is writer w's entry in m with line among its lines, nil
// when there is no writer or it is the victim itself.
func sourcePages(m map[uint64]*SourcePages, w uint64, line uint64, self uint64) *SourcePages {
	if w == 0 || w == self {
		return nil
	}
	s := m[w]
	if s == nil {
		s = &SourcePages{}
		m[w] = s
	}
	if line != 0 && !slices.Contains(s.Lines, line) {
		s.Lines = append(s.Lines, line)
	}
	return s
}
