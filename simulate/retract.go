package simulate

import (
	"container/heap"
	"time"
)

// Decode retraction, as SGLang's PD decode does it (managers/scheduler.py
// update_running_batch -> ScheduleBatch.retract_decode -> release_req;
// disaggregation/decode.py resume_retracted_reqs): when the next decode
// step does not fit, a running request's KV is copied to host memory
// (offload_kv_cache) and all its pages are freed (release_kv_cache, onto
// release_pages with need_sort); the request waits in the prealloc
// queue's retracted_queue and, once the pool has room, _pre_alloc takes
// pages for its prompt and the output so far and load_kv_cache writes its
// KV back. The freed pages keep its data until they are written again.
// SGLang logs the count of retracted requests (the "#retracted_reqs" INFO
// line and #retracted-req on decode batch lines) and, in the Finish
// line's meta_info, num_retractions; never which request was retracted
// when. The simulator writes the batch-line count and num_retractions.

// retractDecode frees r's pages and stops its growth until it resumes.
func (s *sim) retractDecode(t int64, r *request) {
	dc := r.dc
	if r.done || r.freed || r.retracted || r.pages == nil || !dc.up || dc.epoch != r.dEpoch {
		return
	}
	rk := dc.ranks[r.drank]
	rk.pool.advance(t)
	if r.promptPages < len(r.pages) {
		// The output pages written so far, logged as one write (as at
		// finish): the pages freed here keep them.
		dc.pageEvent(t-int64(time.Microsecond), r.drank, "write", r.drid, r.room, r.pages[r.promptPages:])
	}
	dc.pageEvent(t, r.drank, "free", r.drid, r.room, r.pages)
	rk.pool.retract(r)
	r.retractedAt = t
	rk.running--
	rk.retracted++
}

// resumeDecode preallocates r's pages again and writes its KV back; it
// retries while the pool has no room.
func (s *sim) resumeDecode(t int64, r *request) {
	dc := r.dc
	if !r.retracted || r.done || r.freed || !dc.up || dc.epoch != r.dEpoch {
		return
	}
	rk := dc.ranks[r.drank]
	rk.pool.advance(t)
	r.paused += t - r.retractedAt
	pages := rk.pool.resume(t, r, s.tenants[r.tenant].id)
	if pages == nil {
		r.paused -= t - r.retractedAt
		s.heap.push(event{at: t + int64(allocRetry), kind: evResume, r: r})
		return
	}
	rk.retracted--
	rk.running++
	dc.pageEvent(t, r.drank, "alloc", r.drid, r.room, pages)
	dc.pageEvent(t, r.drank, "write", r.drid, r.room, pages)
}

// retract is release_req for a retracted request: all its pages are freed
// (their contents stay until rewritten) and its pending page-boundary
// crossings are dropped.
func (p *pagePool) retract(r *request) {
	p.release(r.pages)
	r.retracted = true
	r.growGen++
	r.heldPages = len(r.pages)
	r.pages = nil
}

// resume is _pre_alloc for a retracted request: as many pages as it held
// (prompt plus output so far, through alloc_extend), written with its KV
// (load_kv_cache: prompt pages as prompt, the rest as output); its growth
// goes on from the next page boundary on its per-token schedule shifted
// by the time spent retracted (r.paused). nil when the pool has no room.
func (p *pagePool) resume(t int64, r *request, tenant uint16) []int32 {
	n := r.heldPages
	if n > p.available() {
		return nil
	}
	pages := p.allocExtend(n * p.pageSize)
	if pages == nil {
		return nil
	}
	r.retracted = false
	r.pages = pages
	pp := min(r.promptPages, len(pages))
	p.write(pages[:pp], r.seq, tenant, false)
	p.write(pages[pp:], r.seq, tenant, true)
	last := r.prompt + r.completion - 2
	next := len(pages) * p.pageSize
	if next <= last {
		g := &grower{every: r.every, next: next, last: last, r: r, tenant: tenant, gen: r.growGen}
		g.at = max(t, r.firstAt+r.paused+int64(next-r.prompt+1)*r.every)
		heap.Push(&p.growing, g)
	}
	return pages
}
