package analyze

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The allocator replay, streamed. Each decode node's Receive/Finish lines
// arrive in time order (one query per node) and go straight to their lane
// (DP rank, boot). A lane turns a request into allocator operations once
// its lines are in (its Finish, which fixes its output length), and runs
// every operation older than its oldest unfinished request: nothing that
// arrives later can come before it. So a lane holds the operations of the
// requests in flight, not of the window; what still grows with the window
// is one small record per request of the lane (rreq), which page records
// point to. Nodes are independent and replay in parallel
// (Config.ReplayWorkers).
//
// The result is the replay of each whole lane in one sorted pass (runLane
// over all its operations), with one exception: a request whose Finish
// comes more than replayHorizon after its Receive (or never: a lost line)
// would hold its lane's operations back until then. After replayHorizon
// the lane stops waiting for it: it takes its pages at its Receive and
// keeps them until its Finish, without the decode growth its output
// length would have added.

// replayHorizon is how long a lane waits for a request's Finish before it
// replays past the request's Receive.
const replayHorizon = time.Hour

// replayLineage replays every decode lane from replayStart to the window
// end and answers ask: node by node, several at once in this process, or
// shared among an analysis job's workers (Dataset.replayer).
// The victims' lineage comes back in a lineageSet (on local disk), added
// as the lanes find it final; held (the candidates' holders) in memory.
func replayLineage(ctx context.Context, d *Dataset, placeholder map[uint64]bool, ask *replayAsk) (*lineageSet, map[uint64][]uint64, error) {
	held := map[uint64][]uint64{}
	if len(ask.writers) == 0 && len(ask.holders) == 0 {
		return nil, held, nil
	}
	from, to := d.replayStart(), d.Window.To.Add(d.Cfg.LinkMargin)
	nodes, err := d.DB.DecodeNodes(ctx, from, to)
	if err != nil {
		return nil, nil, err
	}
	run := d.replayer
	if run == nil {
		run = d.replayNodes
	}
	set := newLineageSet()
	res, err := run(ctx, replayJob{from: from, to: to, nodes: nodes, placeholder: placeholder, ask: ask, into: set})
	if err != nil {
		set.close()
		return nil, nil, err
	}
	// Nodes in order, as the replay always wrote them.
	for _, a := range res {
		for room, hs := range a.held {
			held[room] = hs
		}
	}
	return set, held, nil
}

// replayJob is one replay: the decode nodes to replay over [from, to], the
// victims whose decode wrote only a placeholder page, and what is asked.
type replayJob struct {
	from, to    time.Time
	nodes       []string
	placeholder map[uint64]bool
	ask         *replayAsk
	// into, when set, takes the victims' lineage: in this process as the
	// lanes find it (laneSink), from another worker as its node's answer
	// is read back (spill); the answers then hold none.
	into *lineageSet
}

// replayNodes replays j's nodes in this process, Config.ReplayWorkers at
// once (default one per CPU); the answers are in j.nodes' order.
func (d *Dataset) replayNodes(ctx context.Context, j replayJob) ([]replayAnswer, error) {
	res := make([]replayAnswer, len(j.nodes))
	err := eachAtOnce(ctx, len(j.nodes), d.Cfg.ReplayWorkers, func(ctx context.Context, i int) error {
		var err error
		if res[i], err = d.replayNode(ctx, j, i, j.into); err != nil {
			return err
		}
		return j.spill(i, &res[i])
	})
	return res, err
}

// spill moves node i's victims' lineage into j.into, when set.
func (j replayJob) spill(i int, a *replayAnswer) error {
	if j.into == nil {
		return nil
	}
	if err := j.into.add(i, a.lineage); err != nil {
		return err
	}
	a.lineage = nil
	return nil
}

// replayNode replays one decode node of j, its i'th. With into set, the
// victims' lineage goes there as the lanes find it.
func (d *Dataset) replayNode(ctx context.Context, j replayJob, i int, into *lineageSet) (replayAnswer, error) {
	node := j.nodes[i]
	n := newNodeReplay(d, node, j.placeholder, j.ask)
	if into != nil {
		n.sink = &laneSink{set: into, node: i}
	}
	// A timed-out deferred release comes after its request's Finish
	// (30 s by default), so the read reaches past the lines' end.
	rel, err := d.DB.DecodeReleaseTimeouts(ctx, j.from, j.to.Add(d.Cfg.LinkMargin), node)
	if err != nil {
		return replayAnswer{}, fmt.Errorf("replay decode node %s: %w", node, err)
	}
	n.released = rel
	if err := d.DB.ScanDecodeNodeLines(ctx, j.from, j.to, node, n.line); err != nil {
		return replayAnswer{}, fmt.Errorf("replay decode node %s: %w", node, err)
	}
	ans := n.finish()
	if n.sink != nil && n.sink.err != nil {
		return replayAnswer{}, fmt.Errorf("replay decode node %s: %w", node, n.sink.err)
	}
	return ans, nil
}

// eachAtOnce calls fn for 0..n-1, up to workers at once (default one per
// CPU); the first error cancels the others' context and is returned.
func eachAtOnce(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, workers)
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel() // the others stop
	}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				fail(ctx.Err())
				return
			}
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// laneID is a lane of a decode node: a DP rank under one boot.
type laneID struct {
	rank int16
	boot *Boot
}

// nodeReplay is one decode node's stream: the requests in flight by rid
// and the node's lanes.
type nodeReplay struct {
	d           *Dataset
	node        string
	placeholder map[uint64]bool
	ask         *replayAsk
	flying      map[string]*flight
	lanes       map[laneID]*laneStream
	prev        rowRef
	now         time.Time
	// sink, when set, takes the victims' lineage as the lanes find it
	// (laneStream.sink); the node's answer then has none.
	sink *laneSink
	// out is the node's answer, which lanes add to as they finish; boot
	// is the boot of the latest request admitted.
	out  replayAnswer
	boot *Boot
	// released is when a deferred KV release timed out, per room: decode
	// held the aborted request's pages until then (decode.py
	// resolve_deferred_releases, sglang #35049).
	released map[uint64]time.Time
}

// rowRef names one row of a typed table: its line and its message in the
// line (two SGLang lines glued without a newline are one line, two rows).
type rowRef struct {
	line uint64
	msg  uint8
}

// flight is a request whose Finish has not arrived, and its lane (nil when
// its boot cannot be replayed).
type flight struct {
	r  *rreq
	ls *laneStream
}

func newNodeReplay(d *Dataset, node string, placeholder map[uint64]bool, ask *replayAsk) *nodeReplay {
	return &nodeReplay{d: d, node: node, placeholder: placeholder, ask: ask,
		flying: map[string]*flight{}, lanes: map[laneID]*laneStream{}, out: newReplayAnswer()}
}

// line takes the node's next row (time order; a row stored twice, not
// merged yet, comes twice in a row).
func (n *nodeReplay) line(e *EngineEvent) error {
	at := rowRef{e.Line, e.Msg}
	if at == n.prev || e.Room == 0 {
		return nil
	}
	n.prev = at
	n.now = e.TS
	f := n.flying[e.RID]
	if f == nil {
		f = &flight{r: &rreq{room: e.Room, ownWrites: true, first: e.Line}}
		n.flying[e.RID] = f
	}
	r := f.r
	r.last = e.Line
	switch e.Event {
	case "received":
		if r.recv.IsZero() {
			r.recv, r.prompt = e.TS, int(e.Prompt)
			f.ls = n.admit(r)
		}
	case "finished":
		r.fin, r.finished = e.TS, true
		if e.Prompt > 0 {
			r.prompt = int(e.Prompt)
		}
		r.completion = int(e.Completion)
		if e.FinishType == "abort" && e.Completion == 0 {
			r.ownWrites = false
		}
		// Its lines are all in: the map holds only requests in flight.
		delete(n.flying, e.RID)
		if f.ls != nil {
			f.ls.finished(r.ri, n.now)
		}
	}
	return nil
}

// admit puts a received request in its lane: (DP rank, boot) of the boot
// in force at its Receive. Without a boot that follows the room there is
// no rank, and the caller falls back to the node window.
func (n *nodeReplay) admit(r *rreq) *laneStream {
	b := n.d.Boots.At(n.node, r.recv)
	if b != n.boot && b != nil && n.boot != nil && n.boot.At.Before(b.At) {
		n.retire(b)
	}
	n.boot = b
	if b == nil || !b.FollowsRoom() || b.DPSize == 0 {
		return nil
	}
	id := laneID{int16(r.room % b.DPSize), b}
	ls, ok := n.lanes[id]
	if !ok {
		ls = newLaneStream(n.d, id, n.ask)
		if ls != nil {
			ls.released = n.released
		}
		if ls != nil {
			ls.sink, ls.d, ls.node = n.sink, n.d, n.node
		}
		n.lanes[id] = ls
	}
	if ls == nil || ls.done {
		return nil // a pool without pages, or a boot already retired: nothing to replay
	}
	r.placeholder = n.placeholder[r.room]
	ls.admit(r)
	return ls
}

// retireLanes is whether a node's lanes of earlier boots finish when a
// later boot's first request arrives (tests compare with holding them to
// the node's end).
var retireLanes = true

// retire finishes the lanes of boots before b: the engine restarted, so
// no line of theirs can follow. Held to the node's end, a node's lanes of
// every boot in the window were alive at once, and a lane's pages are
// its pool's: at a page size of one token, 50 MB a rank and order for a
// pool of 3,145,728 tokens, so memory grew with the node's restarts. They
// finish in the order finish would give them, boot then rank, before any
// lane of a later boot: the answer is the same.
func (n *nodeReplay) retire(b *Boot) {
	if retireLanes {
		n.finishLanes(func(id laneID) bool { return id.boot.At.Before(b.At) })
	}
}

// finish ends the node's stream: every lane runs what is left and reports
// its wanted rooms, lanes in boot then rank order.
func (n *nodeReplay) finish() replayAnswer {
	n.finishLanes(func(laneID) bool { return true })
	return n.out
}

// finishLanes finishes the unfinished lanes which selects, in boot then
// rank order, into the node's answer, and lets them go.
func (n *nodeReplay) finishLanes(which func(laneID) bool) {
	ids := make([]laneID, 0, len(n.lanes))
	for id, ls := range n.lanes {
		if ls != nil && !ls.done && which(id) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].boot.At != ids[j].boot.At {
			return ids[i].boot.At.Before(ids[j].boot.At)
		}
		return ids[i].rank < ids[j].rank
	})
	for _, id := range ids {
		ls := n.lanes[id]
		ls.finish(n.d, n.node, n.out)
		// Only its being done stays: a late line of its boot finds it.
		*ls = laneStream{done: true}
	}
}

// laneStream is one lane being replayed as its lines arrive.
type laneStream struct {
	done       bool // finished: later lines of its boot change nothing
	id         laneID
	npages, ps int
	end        time.Time // the lane's last instant: its boot's end or the read's
	ask        *replayAsk
	reqs       []*rreq
	// inflight: indexes of received, unfinished requests in Receive order
	// (finished ones leave lazily, from the head).
	inflight []int32
	head     int
	pending  []op // operations not run yet
	sorted   int  // how many of pending, from the first, are in order
	flushAt  int
	// runs[0] replays lines of one instant in file order; runs[1], kept
	// while every Receive of the lane is on a whole second, in the
	// reversed order (second-granular logs do not fix it).
	runs    []*laneRun
	coarse  bool
	unknown int
	// compactAt: the request records are compacted when the lane holds
	// this many. wantRecv keeps the wanted rooms' Receive times, which the
	// result needs after their records may be gone.
	compactAt int
	wantRecv  map[uint64]time.Time
	// sink, when set, takes the lane's victims as soon as they are final
	// (spillFinal) and at the lane's end, instead of the node's answer;
	// d and node are what a victim's lineage is made with, noteAt the
	// lane's note in the sink's set (0: none yet).
	// released: nodeReplay.released.
	released map[uint64]time.Time
	sink     *laneSink
	d        *Dataset
	node     string
	noteAt   int32
}

// laneSink takes a node's lanes' victims into a lineageSet as they come.
// The first error is kept, and nothing more is added.
type laneSink struct {
	set  *lineageSet
	node int
	err  error
}

func (s *laneSink) add(ls *laneStream, room uint64, vr *VictimReplay) {
	if s.err == nil {
		s.err = s.set.addVictim(s.node, laneOrder{ls.id.boot.At.UnixNano(), ls.id.rank}, s.slot(ls), room, vr)
	}
}

// note sets the lane's note, which its victims are read with.
func (s *laneSink) note(ls *laneStream, note string) {
	s.set.setNote(s.slot(ls), note)
}

func (s *laneSink) slot(ls *laneStream) int32 {
	if ls.noteAt == 0 {
		ls.noteAt = s.set.newNote()
	}
	return ls.noteAt
}

// flushMin is the fewest pending operations a lane runs at a time (a flush
// sorts what is pending, so it is batched); compactMin the fewest request
// records a lane compacts. Variables: tests make them small.
var (
	flushMin   = 4096
	compactMin = 1 << 16
)

func newLaneStream(d *Dataset, id laneID, ask *replayAsk) *laneStream {
	b := id.boot
	ps := int(b.PageSize)
	if ps <= 0 {
		// Not logged: SGLang's default, and so its token allocator
		// (lanePool.token).
		ps = 1
	}
	npages := int(b.MaxTotalTokens) / ps
	if npages <= 0 {
		return nil
	}
	end := d.Window.To.Add(d.Cfg.LinkMargin)
	if e := b.End(); !e.IsZero() && e.Before(end) {
		end = e
	}
	sorted := needSort(b)
	return &laneStream{id: id, npages: npages, ps: ps, end: end, ask: ask, flushAt: flushMin, coarse: true,
		runs:      []*laneRun{newLaneRun(npages, ps, sorted, ask), newLaneRun(npages, ps, sorted, ask)},
		compactAt: compactMin, wantRecv: map[uint64]time.Time{}}
}

// admit adds a received request to the lane (r.ri is its index).
func (ls *laneStream) admit(r *rreq) {
	if len(ls.reqs) >= ls.compactAt {
		ls.compact()
	}
	r.ri = int32(len(ls.reqs))
	ls.reqs = append(ls.reqs, r)
	ls.inflight = append(ls.inflight, r.ri)
	r.ask(ls.ask)
	if _, ok := ls.wantRecv[r.room]; !ok && r.wanted {
		ls.wantRecv[r.room] = r.recv
	}
	if ls.coarse && r.recv.UnixNano()%int64(time.Second) != 0 {
		ls.coarse = false
		ls.runs[1].close()
		ls.runs = ls.runs[:1]
	}
}

// compact drops the records of requests nothing refers to any more: not in
// flight, not queued or pending, holding no page and named by no page as
// its holder or (previous) writer. What is left is bounded by the pool's
// pages and the requests in flight, so a lane's memory does not grow with
// the window.
func (ls *laneStream) compact() {
	live := make([]bool, len(ls.reqs))
	page := func(i int32) {
		if i > 0 {
			live[i-1] = true
		}
	}
	for _, lr := range ls.runs {
		lr.p.refs(page)
		for _, q := range lr.queue {
			live[q.ri] = true
		}
		for i, h := range lr.p.holds {
			if h {
				live[i] = true
			}
		}
	}
	for _, o := range ls.pending {
		live[o.ri] = true
	}
	for _, ri := range ls.inflight[ls.head:] {
		live[ri] = true
	}
	remap := make([]int32, len(ls.reqs))
	n := int32(0)
	for i, r := range ls.reqs {
		remap[i], r.ri = -1, -1
		if live[i] {
			remap[i], r.ri = n, n
			ls.reqs[n] = r
			n++
		}
	}
	clear(ls.reqs[n:])
	ls.reqs = ls.reqs[:n]
	ref := func(i int32) int32 {
		if i == 0 {
			return 0
		}
		return remap[i-1] + 1
	}
	for _, lr := range ls.runs {
		p := lr.p
		p.renumber(ref)
		for k := range lr.queue {
			lr.queue[k].ri = remap[lr.queue[k].ri]
		}
		held, holds := make([]pageList, n), make([]bool, n)
		for i := range p.held {
			if j := remap[i]; j >= 0 {
				held[j], holds[j] = p.held[i], p.holds[i]
			}
		}
		p.held, p.holds, p.reqs = held, holds, ls.reqs
	}
	for k := range ls.pending {
		ls.pending[k].ri = remap[ls.pending[k].ri]
	}
	inflight := ls.inflight[:0]
	for _, ri := range ls.inflight[ls.head:] {
		inflight = append(inflight, remap[ri])
	}
	ls.inflight, ls.head = inflight, 0
	ls.compactAt = max(compactMin, 2*int(n))
}

// finished takes a request whose Finish arrived at now. A request whose
// record is gone (ri < 0) was one the lane stopped waiting for and that
// never got pages: its Finish changes nothing.
func (ls *laneStream) finished(ri int32, now time.Time) {
	if ri < 0 || ls.done {
		return
	}
	ls.emit(ri)
	if len(ls.pending) >= ls.flushAt {
		ls.flush(now, false)
	}
}

// emit turns a request whose lines are in into its operations: as runLane
// has them (replayLane before streaming), or, for a request the lane
// stopped waiting for, only its free.
func (ls *laneStream) emit(ri int32) {
	r := ls.reqs[ri]
	fin := r.fin
	if !r.finished || fin.Before(r.recv) {
		ls.unknown++
		fin = ls.end // unknown output length: holds its pages to the end
	}
	if r.gaveUp {
		if r.finished {
			ls.pending = append(ls.pending, op{ls.freedAt(r, fin).UnixNano(), r.last, ri, opFree})
		}
		return
	}
	recvLine := r.first
	ls.pending = append(ls.pending, op{r.recv.UnixNano(), recvLine, ri, opPrealloc})
	if r.finished && r.ownWrites && r.completion >= 2 {
		// Token i (the first comes with the transfer) is fed at step i
		// and occupies position prompt+i-1; a page is allocated when
		// that position starts a page. Step times are interpolated.
		dur := fin.Sub(r.recv).Nanoseconds()
		last := r.prompt + r.completion - 2
		r.growth = 0
		for pos := (r.prompt + ls.ps - 1) / ls.ps * ls.ps; pos <= last; pos += ls.ps {
			r.growth++
			i := pos - r.prompt + 1
			ls.pending = append(ls.pending, op{r.recv.UnixNano() + dur*int64(i)/int64(r.completion), recvLine, ri, opGrow})
		}
	}
	if r.finished {
		ls.pending = append(ls.pending, op{ls.freedAt(r, fin).UnixNano(), r.last, ri, opFree})
	}
}

// freedAt is when a finished request's pages go back to the free list: at
// its Finish, or, when its deferred release timed out after that, at the
// timeout. (A release the prefill acked in time is not logged at INFO:
// those pages are freed at the Finish here, up to the timeout early.)
func (ls *laneStream) freedAt(r *rreq, fin time.Time) time.Time {
	if t, ok := ls.released[r.room]; ok && t.After(fin) {
		return t
	}
	return fin
}

// flush runs the pending operations no later line can precede: those of
// whole seconds before the oldest request in flight (all of them when the
// stream has ended).
func (ls *laneStream) flush(now time.Time, final bool) {
	wm := int64(math.MaxInt64)
	if !final {
		for ls.head < len(ls.inflight) {
			r := ls.reqs[ls.inflight[ls.head]]
			if r.finished || r.gaveUp {
				ls.head++
				continue
			}
			if now.Sub(r.recv) <= replayHorizon {
				break
			}
			// Waited long enough: it takes its pages at its Receive and
			// keeps them until a Finish comes, if one does.
			ls.pending = append(ls.pending, op{r.recv.UnixNano(), r.first, ls.inflight[ls.head], opPrealloc})
			r.gaveUp = true
			ls.head++
		}
		if ls.head > len(ls.inflight)/2 {
			ls.inflight = append(ls.inflight[:0], ls.inflight[ls.head:]...)
			ls.head = 0
		}
		wm = now.UnixNano()
		if ls.head < len(ls.inflight) {
			wm = ls.reqs[ls.inflight[ls.head]].recv.UnixNano()
		}
		wm -= wm % int64(time.Second)
	}
	buf := opBufs.Get().(*[]op)
	defer opBufs.Put(buf)
	sortOps(ls.pending, ls.sorted, false, buf)
	k, _ := slices.BinarySearchFunc(ls.pending, wm, func(o op, t int64) int {
		if o.at < t {
			return -1
		}
		return 1
	})
	ready := ls.pending[:k]
	if len(ls.runs) > 1 {
		alt := slices.Clone(ready)
		sortOps(alt, 0, true, buf)
		for _, o := range alt {
			ls.runs[1].apply(ls.reqs, o)
		}
	}
	for _, o := range ready {
		ls.runs[0].apply(ls.reqs, o)
	}
	ls.pending = append(ls.pending[:0], ls.pending[k:]...)
	ls.sorted = len(ls.pending)
	ls.flushAt = max(flushMin, 2*len(ls.pending))
	ls.spillFinal(ls.d, ls.node)
}

// opBufs is the flushes' sorting scratch, shared by the lanes.
var opBufs = sync.Pool{New: func() any { return new([]op) }}

// finish runs what is left (requests without a Finish hold their pages to
// the end) and adds the lane's wanted rooms to out, as one replay of the
// whole lane reports them.
func (ls *laneStream) finish(d *Dataset, node string, out replayAnswer) {
	for _, ri := range ls.inflight[ls.head:] {
		if r := ls.reqs[ri]; !r.finished {
			if r.gaveUp {
				ls.unknown++
				continue
			}
			ls.emit(ri)
		}
	}
	ls.flush(time.Time{}, true)
	results := make([]map[uint64]*VictimReplay, len(ls.runs))
	for i, lr := range ls.runs {
		results[i] = lr.res
		lr.close()
	}
	// A candidate's holders: under any of the orders.
	for room, hs := range ls.runs[0].held {
		u := slices.Clone(hs)
		for _, lr := range ls.runs[1:] {
			u = append(u, lr.held[room]...)
		}
		slices.Sort(u)
		out.held[room] = slices.Compact(u)
	}
	if ls.sink != nil {
		// The lane's unknown count is final now: the victims spilled
		// before are read with it (lineageSet.get), as are the rest.
		inline := len(results) > 1
		if !inline && ls.unknown > 0 {
			ls.sink.note(ls, unknownNote(ls.unknown))
		}
		for room := range results[0] {
			ls.sink.add(ls, room, ls.victim(d, node, room, results, inline))
		}
		return
	}
	for room := range results[0] {
		out.lineage[room] = ls.victim(d, node, room, results, true)
	}
}

// spillFinal hands the sink the victims the lane has answered so far,
// when the lane is replayed in one order: a victim's lineage is then
// final at its prealloc (laneRun.step), and it is let go. Held to the
// lane's end (lanes end with their node's lines), the victims' writers
// were 42 MiB of abort_reuse's replay at incident-2026 scale 100, two
// nodes at once, growing with the window. A lane still replayed in both
// orders (second-granular logs) keeps its victims: a writer is likely
// only if both orders have it, and the second order may still be dropped.
func (ls *laneStream) spillFinal(d *Dataset, node string) {
	if ls.sink == nil || len(ls.runs) != 1 || len(ls.runs[0].res) == 0 {
		return
	}
	results := []map[uint64]*VictimReplay{ls.runs[0].res}
	for room := range results[0] {
		ls.sink.add(ls, room, ls.victim(d, node, room, results, false))
	}
	clear(ls.runs[0].res)
}

// unknownNote is what a lane's requests without a Finish line make of its
// victims' lineage.
func unknownNote(n int) string {
	return strconv.Itoa(n) + " requests without a Finish line in the lane"
}

// victim is room's lineage as one replay of the whole lane reports it,
// from the lane's orders' results: a writer is likely if every order has
// it likely. withUnknown adds the lane's count of requests without a
// Finish, known only at the lane's end.
func (ls *laneStream) victim(d *Dataset, node string, room uint64, results []map[uint64]*VictimReplay, withUnknown bool) *VictimReplay {
	b := ls.id.boot
	first := results[0][room]
	vr := &VictimReplay{Room: room, Node: node, Rank: ls.id.rank, Boot: b.ID, PageSize: ls.ps,
		Likely: map[uint64]*SourcePages{}, Possible: map[uint64]*SourcePages{}, Lines: first.Lines}
	inAll := func(w uint64) bool {
		for _, res := range results {
			if r := res[room]; r == nil || r.Likely[w] == nil {
				return false
			}
		}
		return true
	}
	for _, res := range results {
		r := res[room]
		if r == nil {
			continue
		}
		for w, s := range r.Likely {
			dst := vr.Possible
			if inAll(w) {
				dst = vr.Likely
			}
			mergeSource(dst, w, s)
		}
		for w, s := range r.Possible {
			if vr.Likely[w] == nil && !inAll(w) {
				mergeSource(vr.Possible, w, s)
			}
		}
	}
	for w := range vr.Likely {
		delete(vr.Possible, w)
	}
	if ls.coarse {
		vr.Uncertain = append(vr.Uncertain, "same-second lines replayed in both orders")
	}
	if withUnknown && ls.unknown > 0 {
		vr.Uncertain = append(vr.Uncertain, unknownNote(ls.unknown))
	}
	if t := ls.wantRecv[room]; gappedBefore(d, node, t) {
		// A completeness gap before the read: requests may be missing
		// from the replay, so no writer is more than possible.
		vr.Uncertain = append(vr.Uncertain, "completeness gap on the node in the 4 h before the read")
		for w, s := range vr.Likely {
			mergeSource(vr.Possible, w, s)
		}
		clear(vr.Likely)
	}
	return vr
}

// gappedBefore reports a completeness gap on node in the 4 h before t.
func gappedBefore(d *Dataset, node string, t time.Time) bool {
	for _, g := range d.Gaps {
		if g.Node == node && g.To.After(t.Add(-4*time.Hour)) && g.From.Before(t) {
			return true
		}
	}
	return false
}
