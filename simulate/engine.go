package simulate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Timing model constants. Prefill time = uncached tokens / node throughput
// (+ overhead and queueing behind earlier prefills on the same DP rank);
// transfer time = tokens * KV bytes per token / bandwidth; decode runs at a
// per-request token rate.
const (
	kvBytesPerToken = 70_272 // MLA: 61 layers * 576 dims * 2 bytes
	transferBW      = 20e9   // bytes/s per prefill->decode pair
	prefillOverhead = 6 * time.Millisecond
	bootstrapDelay  = 2 * time.Millisecond
	allocRetry      = 500 * time.Millisecond
	longThreshold   = incidentPool - 6 // max_req_input_len of the incident pool
)

const (
	fateNormal uint8 = iota
	fateStall
	fateTimeout
)

type request struct {
	seq        uint32
	tenant     int
	class      uint8
	sess       *session
	unified    bool
	prompt     int
	cached     int
	completion int

	t0     int64
	gw     int
	port   int
	pf, dc *node
	pEpoch uint32
	dEpoch uint32
	prank  int
	drank  int
	room   uint64
	prid   string
	drid   string

	pages       []int32
	promptPages int
	pfDur       int64
	allocStart  int64
	allocAt     int64
	firstAt     int64
	fate        uint8
	stall       int64
	metaIdx     int
	retract     int
	// Retraction (retract.go): growth generation (a retraction stops the
	// pending page-boundary crossings), time per token and total pause.
	growGen   int
	every     int64
	paused    int64
	retracted bool
	// retractedAt and heldPages: when it was retracted and how many pages
	// it held then (resume preallocates as many).
	retractedAt int64
	heldPages   int
	meta        struct {
		seq    uint32
		tenant uint16
		room   uint64
		ok     bool
	}

	placeholder, pRecv, allocated, waiting, landed, aborted, deferFree, freed, done bool
}

type sim struct {
	cfg     Config
	sc      scenario
	rng     *rand.Rand
	ids     idGen
	heap    eventHeap
	base    int64
	span    int64
	nodes   []*node
	prefill []*node
	decode  []*node
	unified *node
	tenants []*tenant
	gws     []*lineWriter
	truth   *truthBuilder

	nextSeq  uint32
	requests int
	files    int
	lines    int64
	bytes    int64
	err      error
}

func (s *sim) setErr(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *sim) tenantName(r *request) string { return s.tenants[r.tenant].name }

// ---- routing -----------------------------------------------------------

func (s *sim) pickPrefill(r *request) *node {
	if ss := r.sess; ss != nil && ss.sticky != nil && ss.sticky.up && ss.sticky.role == rolePrefill && s.rng.Float64() < 0.9 {
		return ss.sticky
	}
	var total float64
	for _, n := range s.prefill {
		if n.up {
			total += prefillWeight(n)
		}
	}
	if total == 0 {
		return nil
	}
	x := s.rng.Float64() * total
	for _, n := range s.prefill {
		if n.up {
			x -= prefillWeight(n)
			if x <= 0 {
				return n
			}
		}
	}
	for i := len(s.prefill) - 1; i >= 0; i-- {
		if s.prefill[i].up {
			return s.prefill[i]
		}
	}
	return nil
}

func prefillWeight(n *node) float64 {
	if n.canary {
		return 0.5
	}
	return 1
}

func (s *sim) pickDecode() *node {
	var up []*node
	for _, n := range s.decode {
		if n.up {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[s.rng.IntN(len(up))]
}

// ---- lifecycle ---------------------------------------------------------

func (s *sim) arrive(t int64, r *request) {
	s.nextSeq++
	s.requests++
	r.seq = s.nextSeq
	r.t0 = t
	r.gw = s.rng.IntN(len(s.gws))
	r.port = 30000 + s.rng.IntN(35000)
	r.room = s.ids.room(r.seq)
	if r.unified && s.unified != nil {
		if !s.unified.up {
			s.gatewayError(r, t+int64(time.Millisecond), 503)
			return
		}
		r.pf, r.pEpoch = s.unified, s.unified.epoch
		r.room = 0
		r.prid = s.ids.prefillRID(r.seq)
		s.heap.push(event{at: t + s.dur(0.0003, 0.0012), kind: evPRecv, r: r})
		return
	}
	r.unified = false
	pf, dc := s.pickPrefill(r), s.pickDecode()
	if pf == nil || dc == nil {
		s.gatewayError(r, t+int64(time.Millisecond), 503)
		return
	}
	r.pf, r.dc, r.pEpoch, r.dEpoch = pf, dc, pf.epoch, dc.epoch
	r.prank = int(r.room % uint64(pf.dp))
	r.drank = int(r.room % uint64(dc.dp))
	r.prid, r.drid = s.ids.prefillRID(r.seq), s.ids.decodeRID(r.seq)
	if ss := r.sess; ss != nil {
		r.cached = 0
		if pf == ss.sticky && pf.epoch == ss.stickyEpoch && ss.lastOK && s.rng.Float64() < 0.9 {
			r.cached = ss.prevPrompt / s.sc.pageSize * s.sc.pageSize
		} else if tn := s.tenants[r.tenant]; r.prompt > tn.sysPrompt {
			r.cached = tn.sysPrompt / s.sc.pageSize * s.sc.pageSize
		}
	}
	switch x := s.rng.Float64(); {
	case x < s.sc.timeoutProb && r.class == classBatch:
		r.fate = fateTimeout
	case x < s.sc.timeoutProb+s.sc.stallProb:
		r.fate = fateStall
		r.stall = s.dur(6, 40)
	}
	s.heap.push(event{at: t + s.dur(0.0003, 0.0012), kind: evPRecv, r: r})
	s.heap.push(event{at: t + s.dur(0.0003, 0.0012), kind: evDRecv, r: r})
}

func (s *sim) sideLog(r *request, decode bool) reqLog {
	q := reqLog{rid: r.prid, room: r.room, maxNew: r.completion, prompt: r.prompt}
	if decode {
		q.rid = r.drid
	}
	if r.pf != nil {
		q.bootHost = r.pf.host
	}
	if (decode && r.dc.reqLevel >= 2) || (!decode && r.pf.reqLevel >= 2) {
		q.text = s.promptText(r)
	}
	return q
}

func (s *sim) prefillRecv(t int64, r *request) {
	pf := r.pf
	if !pf.up || pf.epoch != r.pEpoch {
		s.failDecodeSide(t, r, 503, "")
		return
	}
	q := s.sideLog(r, false)
	pf.receive(t, &q)
	if r.prompt > contextLen {
		pf.access(t+int64(time.Millisecond), r.port, 400)
		if r.unified {
			s.gatewayError(r, t+2*int64(time.Millisecond), 400)
			s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookContextLength)
		}
		return
	}
	if r.prompt >= pf.limit() {
		lim := pf.limit()
		rt := t + int64(200*time.Microsecond)
		pf.reject(rt, r.prank, r.prompt, lim, r.prid)
		if r.unified {
			// Non-PD: the abort reaches the client as a 400 (correct behaviour).
			q.finishType, q.abortCode = "abort", 400
			q.abortMsg = fmt.Sprintf("Input length (%d tokens) exceeds the maximum allowed length (%d tokens). Use a shorter input or enable --allow-auto-truncate.", r.prompt, lim)
			q.prompt, q.e2e = 1, float64(rt-r.t0)/1e9
			pf.finish(rt+int64(time.Millisecond), &q)
			pf.access(rt+int64(time.Millisecond), r.port, 400)
			pf.cReqs++
			s.gatewayError(r, rt+2*int64(time.Millisecond), 400)
			s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookRejectedNonPD)
			return
		}
		// PD: origin_input_ids becomes the 1-token placeholder and the request
		// keeps going through bootstrap and transfer (#30233).
		r.placeholder = true
	}
	if r.unified {
		s.unifiedSchedule(t, r)
		return
	}
	r.pRecv = true
	if r.allocated {
		s.schedulePrefill(t, r)
	}
}

func (s *sim) decodeRecv(t int64, r *request) {
	dc := r.dc
	if !dc.up || dc.epoch != r.dEpoch {
		s.gatewayError(r, t, 503)
		return
	}
	q := s.sideLog(r, true)
	dc.receive(t, &q)
	if r.prompt > contextLen {
		dc.access(t+int64(time.Millisecond), r.port, 400)
		s.gatewayError(r, t+2*int64(time.Millisecond), 400)
		s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookContextLength)
		return
	}
	r.allocStart = t
	s.tryAlloc(t, r)
}

func (s *sim) tryAlloc(t int64, r *request) {
	dc := r.dc
	if r.done {
		return
	}
	if !dc.up || dc.epoch != r.dEpoch {
		s.gatewayError(r, t, 500)
		return
	}
	rk := dc.ranks[r.drank]
	// Decode preallocates the prompt's pages only (disaggregation/decode.py
	// _pre_alloc); output pages are allocated as generation grows. The
	// admission check counts released pages too (available_size).
	rk.pool.advance(t)
	var pages []int32
	if need := (r.prompt + s.sc.pageSize - 1) / s.sc.pageSize; need <= rk.pool.available() {
		pages = rk.pool.allocExtend(r.prompt)
	}
	if pages == nil {
		if !r.waiting {
			r.waiting = true
			rk.prealloc++
		}
		if t-r.allocStart > int64(waitingTimeout) {
			rk.prealloc--
			s.gatewayError(r, t, 503)
			return
		}
		s.heap.push(event{at: t + int64(allocRetry), kind: evDAllocRetry, r: r})
		return
	}
	if r.waiting {
		r.waiting = false
		rk.prealloc--
	}
	r.pages = pages
	r.promptPages = (r.prompt + s.sc.pageSize - 1) / s.sc.pageSize
	r.allocated, r.allocAt = true, t
	r.metaIdx = rk.metaCtr % 512
	rk.metaCtr++
	rk.transfer++
	dc.pageEvent(t, r.drank, "alloc", r.drid, r.room, pages)
	s.activateTick(t, dc, r.drank)
	if r.pRecv {
		s.schedulePrefill(t, r)
	}
}

func (s *sim) schedulePrefill(t int64, r *request) {
	pf := r.pf
	if !pf.up || pf.epoch != r.pEpoch {
		s.prefillLost(t, r)
		return
	}
	rk := pf.ranks[r.prank]
	start := max(t+int64(bootstrapDelay), rk.busyUntil)
	tokens := r.prompt - r.cached
	if r.placeholder {
		tokens = 1
	}
	r.pfDur = int64(prefillOverhead) + int64(float64(tokens)/pf.tput*1e9)
	rk.busyUntil = start + r.pfDur
	rk.queue++
	s.heap.push(event{at: start, kind: evPStart, r: r})
}

func (s *sim) prefillStart(t int64, r *request) {
	pf := r.pf
	rk := pf.ranks[r.prank]
	rk.queue--
	if !pf.up || pf.epoch != r.pEpoch {
		s.prefillLost(t, r)
		return
	}
	newTok, cached, held := r.prompt-r.cached, r.cached, r.prompt
	if r.placeholder {
		newTok, cached, held = 1, 0, 1
	}
	rk.inflight++
	rk.usedTok += held
	pf.cPrompt += float64(newTok)
	pf.cCached += float64(cached)
	usage := float64(rk.usedTok) / float64(pf.cur().pool)
	pf.prefillBatch(t, r.prank, newTok, cached, usage, rk.inflight, rk.queue, rk.queue*2048, 0, rk.inflight-1,
		float64(newTok)/(float64(r.pfDur)/1e9))
	ev := evPDone
	if r.unified {
		ev = evUFinish
		rk.running++
		s.activateTick(t, pf, r.prank)
	}
	s.heap.push(event{at: t + r.pfDur, kind: ev, r: r})
}

func (s *sim) prefillDone(t int64, r *request) {
	pf, dc := r.pf, r.dc
	if !pf.up || pf.epoch != r.pEpoch {
		s.prefillLost(t, r)
		return
	}
	rk := pf.ranks[r.prank]
	if r.done || !dc.up || dc.epoch != r.dEpoch {
		s.releasePrefill(r)
		pf.transferFailed(t, r.prank, r.prid, r.room, fmt.Sprintf("Decode instance could be dead, remote mooncake session %s:15004 is not alive", dc.host))
		pf.cXferFail++
		s.gatewayError(r, t, 500)
		return
	}
	ntok := r.prompt
	if r.placeholder {
		ntok = 1
	}
	xfer := int64(500*time.Microsecond) + int64(float64(ntok)*kvBytesPerToken/transferBW*1e9)
	switch r.fate {
	case fateTimeout:
		pf.sliceFailed(t, dc, 8, "transport retry counter exceeded")
		pf.transferFailed(t+int64(time.Millisecond), r.prank, r.prid, r.room, fmt.Sprintf("Failed to send kv chunk of %d to %s:15004", r.room, dc.host))
		pf.cXferFail++
		s.releasePrefill(r)
		_ = rk
		s.heap.push(event{at: max(t+sec, r.allocAt+int64(waitingTimeout)), kind: evTimeout, r: r})
		return
	case fateStall:
		pf.sliceFailed(t, dc, 0, "transport retry counter exceeded")
		land := t + xfer + r.stall
		if to := s.tenants[r.tenant].timeout; to > 0 {
			if abortAt := r.t0 + int64(to*1e9); abortAt < land {
				s.heap.push(event{at: max(abortAt, t+int64(time.Millisecond)), kind: evAbort, r: r})
			}
		}
		s.heap.push(event{at: land, kind: evLand, r: r})
	default:
		s.heap.push(event{at: t + xfer, kind: evLand, r: r})
	}
}

func (s *sim) releasePrefill(r *request) {
	rk := r.pf.ranks[r.prank]
	if r.pf.epoch != r.pEpoch {
		return
	}
	rk.inflight--
	if r.placeholder {
		rk.usedTok--
	} else {
		rk.usedTok -= r.prompt
	}
}

// clientAbort: the client gave up waiting for the first token while the
// transfer was stalled. The gateway sends AbortReq to both sides.
func (s *sim) clientAbort(t int64, r *request) {
	if r.landed || r.done {
		return
	}
	r.aborted = true
	dc, pf := r.dc, r.pf
	s.gatewayLine(r, t, 499, 0, 0)
	s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookClientAbort)
	if dc.up && dc.epoch == r.dEpoch {
		dc.transferFailed(t, r.drank, r.drid, r.room, "Aborted by AbortReq.")
		q := s.sideLog(r, true)
		q.finishType, q.abortMsg, q.abortCode, q.e2e = "abort", "Aborted by AbortReq.", 500, float64(t-r.t0)/1e9
		dc.finish(t+int64(time.Millisecond), &q)
		dc.cAborted++
		dc.ranks[r.drank].transfer--
		if s.sc.faults.abortReuse {
			// Deferred release off: pages go back to the pool now, while the
			// prefill's RDMA write for this room is still in flight.
			s.freePages(t+int64(time.Millisecond), r)
		} else {
			r.deferFree = true
		}
	}
	if pf.up && pf.epoch == r.pEpoch {
		pf.transferFailed(t+int64(time.Millisecond), r.prank, r.prid, r.room, "Aborted by AbortReq.")
		q := s.sideLog(r, false)
		q.finishType, q.abortMsg, q.abortCode, q.e2e = "abort", "Aborted by AbortReq.", 500, float64(t-r.t0)/1e9
		pf.finish(t+2*int64(time.Millisecond), &q)
		pf.cAborted++
		s.releasePrefill(r)
	}
}

func (s *sim) freePages(t int64, r *request) {
	if r.retracted && !r.freed {
		// Its pages were freed at the retraction; it never resumes.
		r.freed, r.retracted = true, false
		r.dc.ranks[r.drank].retracted--
		return
	}
	if r.freed || r.pages == nil || r.dc.epoch != r.dEpoch {
		return
	}
	pool := r.dc.ranks[r.drank].pool
	pool.advance(t)
	r.freed = true
	r.dc.pageEvent(t, r.drank, "free", r.drid, r.room, r.pages)
	pool.release(r.pages)
}

// land: the prefill's KV (and metadata) write arrives in the decode pages
// named by the request's TransferInfo, whether or not they still belong to it.
func (s *sim) land(t int64, r *request) {
	r.landed = true
	dc, pf := r.dc, r.pf
	if !dc.up || dc.epoch != r.dEpoch {
		if !r.done {
			s.releasePrefill(r)
			s.gatewayError(r, t, 500)
		}
		return
	}
	rk := dc.ranks[r.drank]
	wp := r.pages[:min(r.promptPages, len(r.pages))]
	if r.placeholder {
		wp = r.pages[:1]
	}
	tid := s.tenants[r.tenant].id
	rk.pool.write(wp, r.seq, tid, false)
	dc.pageEvent(t, r.drank, "write", r.drid, r.room, wp)
	if r.aborted || r.done {
		if r.deferFree {
			s.freePages(t+int64(time.Microsecond), r)
		}
		return
	}
	if pf.up && pf.epoch == r.pEpoch {
		q := s.sideLog(r, false)
		q.finishType, q.length, q.completion, q.e2e = "length", 0, 1, float64(t-r.t0)/1e9
		q.cached = r.cached
		if r.placeholder {
			q.prompt, q.cached = 1, 0
		}
		pf.finish(t, &q)
		pf.access(t, r.port, 200)
		pf.cReqs++
		s.releasePrefill(r)
	}
	rk.transfer--
	if s.sc.faults.metaCollision && rk.last.ok && rk.last.seq != r.seq && s.rng.Float64() < s.sc.collisionProb {
		if dc.version.hasMetadataCheck() {
			dc.corruption(t, r.drank, r.drid, r.room, rk.last.room, r.metaIdx)
			q := s.sideLog(r, true)
			q.finishType, q.abortMsg, q.abortCode, q.e2e = "abort", "Metadata corruption detected - bootstrap_room mismatch", 500, float64(t-r.t0)/1e9
			dc.finish(t+int64(time.Millisecond), &q)
			dc.access(t+int64(time.Millisecond), r.port, 500)
			dc.cAborted++
			s.freePages(t+int64(time.Millisecond), r)
			s.gatewayLine(r, t+2*int64(time.Millisecond), 500, 0, 0)
			s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookMetadataCaught)
			return
		}
		// No echo check on this version: the first token comes from the
		// other room's metadata buffer and is served.
		r.meta = rk.last
	}
	rk.last.seq, rk.last.tenant, rk.last.room, rk.last.ok = r.seq, tid, r.room, true
	rk.running++
	s.heap.push(event{at: t + s.dur(0.015, 0.035), kind: evFirst, r: r})
}

func (s *sim) firstToken(t int64, r *request) {
	dc := r.dc
	if !dc.up || dc.epoch != r.dEpoch {
		s.gatewayError(r, t, 500)
		return
	}
	r.firstAt = t
	d := int64(float64(r.completion) / (35 + 25*s.rng.Float64()) * 1e9)
	r.every = d / int64(max(r.completion, 1))
	if s.rng.Float64() < s.sc.retractProb {
		// Retracted once: its pages are freed at a point of its decode and
		// preallocated again when it resumes (retract.go).
		r.retract = 1
		at := t + int64(s.rng.Float64()*float64(d))
		pause := s.dur(2, 8)
		s.heap.push(event{at: at, kind: evRetract, r: r})
		s.heap.push(event{at: at + pause, kind: evResume, r: r})
		d += pause
	}
	pool := dc.ranks[r.drank].pool
	pool.advance(t)
	pool.startGrowth(r, t, r.every, s.tenants[r.tenant].id)
	if s.rng.Float64() < s.sc.cancelProb {
		s.heap.push(event{at: t + int64(s.rng.Float64()*float64(d)), kind: evCancel, r: r})
		return
	}
	s.heap.push(event{at: t + d, kind: evFinish, r: r})
}

// finishDecode ends a served request: the attention read over all its pages
// decides whether it consumed data that was not its own.
func (s *sim) finishDecode(t int64, r *request, cancelled bool) {
	dc := r.dc
	if r.done {
		return
	}
	if !dc.up || dc.epoch != r.dEpoch {
		s.gatewayError(r, t, 500)
		return
	}
	if r.retracted {
		// Still waiting in the retracted queue: it finishes once resumed.
		kind := evFinish
		if cancelled {
			kind = evCancel
		}
		s.heap.push(event{at: t + int64(allocRetry), kind: kind, r: r})
		return
	}
	rk := dc.ranks[r.drank]
	rk.running--
	completion := r.completion
	if cancelled {
		completion = max(1, int(float64(completion)*float64(t-r.firstAt)/float64(max(1, t-r.firstAt+1))*0.5))
	}
	rk.pool.advance(t)
	if r.promptPages < len(r.pages) {
		// Output pages, logged as one write: the page-event format has no
		// per-step line, and their content is the request's own.
		dc.pageEvent(t-int64(time.Millisecond), r.drank, "write", r.drid, r.room, r.pages[r.promptPages:])
	}
	dc.pageEvent(t, r.drank, "read", r.drid, r.room, r.pages)
	s.checkPages(t, r, rk)
	s.freePages(t+int64(time.Microsecond), r)
	q := s.sideLog(r, true)
	q.completion, q.retract, q.e2e = completion, r.retract, float64(t-r.t0)/1e9
	q.outText = "Sure - here is the summary you asked for."
	status := 200
	switch {
	case cancelled:
		q.finishType, q.abortMsg, q.abortCode = "abort", "Aborted by AbortReq.", 500
		status = 499
		dc.cAborted++
	case completion == r.completion && completion%7 == 0:
		q.finishType, q.length = "length", completion
	default:
		q.finishType = "stop"
	}
	dc.finish(t, &q)
	if !cancelled {
		dc.access(t, r.port, 200)
	}
	dc.cReqs++
	dc.cGen += float64(completion)
	s.gatewayLine(r, t+int64(300*time.Microsecond), status, completion, r.firstAt-r.t0)
	id := s.ids.requestID(r.seq)
	switch {
	case cancelled:
		s.truth.addLookalike(id, s.tenantName(r), LookClientAbort)
	case r.placeholder:
	case r.prompt > longThreshold:
		s.truth.addLookalike(id, s.tenantName(r), LookLongPromptImmune)
	case r.prompt >= 100_000 && r.cached*5 >= r.prompt*4:
		s.truth.addLookalike(id, s.tenantName(r), LookPrefixCacheTTFT)
	case r.retract > 0:
		s.truth.addLookalike(id, s.tenantName(r), LookRetraction)
	}
}

// checkPages compares every page the request read with its last writer.
func (s *sim) checkPages(t int64, r *request, rk *rankState) {
	var stale, never int
	var counts, outs map[uint32]int
	var tenants map[uint32]uint16
	// Neighbouring pages mostly share their last write: a run of one
	// write is counted first and added to the maps once.
	var run pageWrite
	n := 0
	add := func() {
		switch w := run.writer; {
		case n == 0 || w == r.seq:
		case w == 0:
			never += n
		default:
			if counts == nil {
				counts, outs, tenants = map[uint32]int{}, map[uint32]int{}, map[uint32]uint16{}
			}
			stale += n
			counts[w] += n
			if run.output {
				outs[w] += n
			}
			tenants[w] = run.tenant
		}
	}
	for _, p := range r.pages {
		if pw := rk.pool.last[p]; pw != run || n == 0 {
			add()
			run, n = pw, 0
		}
		n++
	}
	add()
	if !r.placeholder && stale == 0 && never == 0 && !r.meta.ok {
		return
	}
	a := AffectedRequest{
		RequestID: s.ids.requestID(r.seq), Tenant: s.tenantName(r), TS: time.Unix(0, s.base+r.t0).UTC(),
		BootstrapRoom: r.room, PrefillNode: r.pf.name, PrefillRID: r.prid, DecodeNode: r.dc.name, DecodeRID: r.drid,
		DecodeDPRank: r.drank, PromptTokens: r.prompt, PrefillLimit: r.pf.limit(), PrefillPool: r.pf.cur().pool,
		StalePages: stale, NeverWritten: never, Class: ClassAbortReuse, Sources: []Source{},
	}
	switch {
	case r.placeholder:
		a.Class = ClassRejectedPlaceholder
	case r.meta.ok && stale == 0:
		a.Class = ClassMetadataCollision
	}
	if r.meta.ok {
		counts = mapAdd(counts, r.meta.seq)
		if tenants == nil {
			tenants = map[uint32]uint16{}
		}
		tenants[r.meta.seq] = r.meta.tenant
	}
	foreign := map[string]bool{}
	for w, c := range counts {
		tn := s.tenants[tenants[w]-1].name
		a.Sources = append(a.Sources, Source{RequestID: s.ids.requestID(w), Tenant: tn, BootstrapRoom: s.ids.room(w), Pages: c,
			PromptPages: c - outs[w], OutputPages: outs[w]})
		if tn != a.Tenant {
			foreign[tn] = true
		}
	}
	slices.SortFunc(a.Sources, func(x, y Source) int {
		if x.Pages != y.Pages {
			return y.Pages - x.Pages
		}
		if x.RequestID < y.RequestID {
			return -1
		}
		return 1
	})
	a.ForeignTenants = sortedKeys(foreign)
	s.truth.addAffected(a)
}

func mapAdd(m map[uint32]int, k uint32) map[uint32]int {
	if m == nil {
		m = map[uint32]int{}
	}
	if _, ok := m[k]; !ok {
		m[k] = 0
	}
	return m
}

func (s *sim) transferTimeout(t int64, r *request) {
	dc := r.dc
	if r.done || !dc.up || dc.epoch != r.dEpoch {
		s.gatewayError(r, t, 500)
		return
	}
	dc.transferFailed(t, r.drank, r.drid, r.room, fmt.Sprintf("Request %d timed out after 300.0s in KVPoll.WaitingForInput", r.room))
	dc.waitingTimeoutHint(t, r.drank)
	q := s.sideLog(r, true)
	q.finishType, q.abortMsg, q.abortCode, q.e2e = "abort", fmt.Sprintf("Request %d timed out after 300.0s in KVPoll.WaitingForInput", r.room), 500, float64(t-r.t0)/1e9
	dc.finish(t+int64(time.Millisecond), &q)
	dc.access(t+int64(time.Millisecond), r.port, 500)
	dc.cXferFail++
	dc.ranks[r.drank].transfer--
	s.freePages(t+int64(time.Millisecond), r)
	s.gatewayLine(r, t+2*int64(time.Millisecond), 500, 0, 0)
	s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookTransferTimeout)
}

// prefillLost: the prefill process died (restart) holding the request; the
// decode side notices the lost bootstrap connection and fails it.
func (s *sim) prefillLost(t int64, r *request) {
	s.failDecodeSide(t, r, 500, fmt.Sprintf("Lost connection with prefill instance (bootstrap_addr: %s)", r.pf.bootstrapAddr()))
}

func (s *sim) failDecodeSide(t int64, r *request, status int, reason string) {
	if r.done {
		return
	}
	dc := r.dc
	if dc != nil && dc.up && dc.epoch == r.dEpoch && r.allocated && !r.aborted {
		if reason != "" {
			reason = lostConnText(dc, reason)
			dc.transferFailed(t, r.drank, r.drid, r.room, reason)
			dc.cXferFail++
		}
		dc.ranks[r.drank].transfer--
		s.freePages(t, r)
		s.truth.addLookalike(s.ids.requestID(r.seq), s.tenantName(r), LookNodeRestart500)
	}
	s.gatewayError(r, t+int64(time.Millisecond), status)
}

// lostConnText: ≤ v0.5.12 said "Losing connection", later "Lost connection".
func lostConnText(dc *node, reason string) string {
	if dc.version < v0518 && len(reason) > 4 && reason[:4] == "Lost" {
		return "Losing" + reason[4:]
	}
	return reason
}

// ---- unified (non-PD) worker -------------------------------------------

func (s *sim) unifiedSchedule(t int64, r *request) {
	n := r.pf
	rk := n.ranks[0]
	start := max(t+int64(time.Millisecond), rk.busyUntil)
	r.pfDur = int64(prefillOverhead) + int64(float64(r.prompt-r.cached)/n.tput*1e9)
	rk.busyUntil = start + r.pfDur
	rk.queue++
	s.heap.push(event{at: start, kind: evPStart, r: r})
}

func (s *sim) unifiedFinish(t int64, r *request) {
	n := r.pf
	rk := n.ranks[0]
	if !n.up || n.epoch != r.pEpoch {
		s.gatewayError(r, t, 500)
		return
	}
	if r.firstAt == 0 {
		// prefill done: first token now, decode the rest.
		r.firstAt = t + s.dur(0.01, 0.03)
		s.heap.push(event{at: r.firstAt + int64(float64(r.completion)/45*1e9), kind: evUFinish, r: r})
		return
	}
	rk.inflight--
	rk.running--
	rk.usedTok -= r.prompt
	q := s.sideLog(r, false)
	q.room, q.finishType, q.completion, q.cached, q.e2e = 0, "stop", r.completion, r.cached, float64(t-r.t0)/1e9
	n.finish(t, &q)
	n.access(t, r.port, 200)
	n.cReqs++
	n.cGen += float64(r.completion)
	s.gatewayLine(r, t+int64(300*time.Microsecond), 200, r.completion, r.firstAt-r.t0)
}

// ---- gateway -----------------------------------------------------------

func (s *sim) gatewayError(r *request, t int64, status int) {
	s.gatewayLine(r, t, status, 0, 0)
}

func (s *sim) gatewayLine(r *request, t int64, status, completion int, ttft int64) {
	if r.done {
		return
	}
	r.done = true
	g := gatewayRecord{start: r.t0, requestID: s.ids.requestID(r.seq), tenant: s.tenantName(r), model: "glm-5.2",
		status: status, prompt: r.prompt, completion: completion, cached: r.cached,
		ttftMS: float64(ttft) / 1e6, durMS: float64(t-r.t0) / 1e6, gateway: gatewayName(r.gw), mode: "pd"}
	g.cached = 0
	if (status == 200 || status == 499) && !r.placeholder {
		// The gateway takes cached_tokens from the prefill response; a
		// placeholder prefill had no cache hit.
		g.cached = r.cached
	}
	if r.unified {
		g.mode = "regular"
		if r.pf != nil {
			g.decodeEP = r.pf.url
		}
		if r.gw == 0 && status == 200 {
			g.decodeRID = r.prid
		}
	} else {
		if r.pf != nil {
			g.prefillEP, g.decodeEP, g.room = r.pf.url, r.dc.url, r.room
		}
		if r.gw == 0 && status == 200 {
			// gw-0 (newer gateway) records the rids from both responses' meta_info.id.
			g.prefillRID, g.decodeRID = r.prid, r.drid
		}
	}
	writeGateway(s.gws[r.gw], &g)
	s.nextTurn(t, r, status)
}

func (s *sim) nextTurn(t int64, r *request, status int) {
	ss := r.sess
	if ss == nil {
		return
	}
	ss.turnsLeft--
	if status == 400 || ss.turnsLeft <= 0 {
		return
	}
	ss.prevPrompt = r.prompt
	ss.lastOK = status == 200 && !r.placeholder
	if r.pf != nil && r.pf.role == rolePrefill {
		ss.sticky, ss.stickyEpoch = r.pf, r.pEpoch
	}
	ss.prompt = r.prompt + ss.growth + s.uniform(0, ss.growth/4)
	next := t + s.dur(20, 180)
	if next >= s.span {
		return
	}
	s.heap.push(event{at: next, kind: evArrive, r: s.sessionRequest(ss)})
}

// ---- node lifecycle and periodic lines ----------------------------------

func (s *sim) activateTick(t int64, n *node, rank int) {
	rk := n.ranks[rank]
	if rk.active {
		return
	}
	rk.active = true
	s.heap.push(event{at: t + int64(decodeLogEvery), kind: evTick, n: n, rank: int32(rank), aux: int32(n.epoch)})
}

func (s *sim) tick(t int64, n *node, rank int, epoch uint32) {
	if n.epoch != epoch || !n.up {
		return
	}
	rk := n.ranks[rank]
	if rk.running+rk.transfer+rk.prealloc == 0 {
		rk.active = false
		return
	}
	b := n.cur()
	var tokens int
	if rk.pool != nil {
		tokens = rk.pool.used() * s.sc.pageSize
	} else {
		tokens = rk.usedTok
	}
	pre := float64(rk.transfer*2048) / float64(b.pool)
	n.decodeBatch(t, rank, rk.running, tokens, float64(tokens)/float64(b.pool), pre, rk.prealloc, rk.transfer, rk.retracted, float64(rk.running)*47.5)
	s.heap.push(event{at: t + int64(decodeLogEvery), kind: evTick, n: n, rank: int32(rank), aux: int32(epoch)})
}

func (s *sim) nodeDown(t int64, n *node, crash bool) {
	n.up = false
	n.epoch++
	if crash {
		n.crashTraceback(t)
		n.garbage()
	}
}

func (s *sim) nodeBoot(t int64, n *node, idx int) {
	n.bootIdx = idx
	n.up = false
	n.warned = false
	n.cPrompt, n.cGen, n.cReqs, n.cAborted, n.cXferFail, n.cBootFail, n.cCached = 0, 0, 0, 0, 0, 0, 0
	n.ranks = make([]*rankState, n.dp)
	for i := range n.ranks {
		n.ranks[i] = &rankState{}
		if n.role == roleDecode {
			n.ranks[i].pool = newPagePool(n.cur().pool/n.pageSize, n.pageSize)
		}
	}
	ready := n.startup(t)
	if n.mc != nil {
		n.mooncakeStartup(t + 30*sec)
	}
	s.heap.push(event{at: ready, kind: evReady, n: n})
}
