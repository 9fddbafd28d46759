package analyze

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// AbortReuse finds decode-side aborts and transfer failures that happened
// while a transfer was in flight, and the requests on the same decode
// instance and DP rank that were given pages afterwards and may have
// received the late write (deferred release off: decode frees the pages at
// the abort while the prefill's RDMA write still lands in them). Without
// page events these are candidates ranked by allocation order; with page
// events a candidate is confirmed only by a read of a page the aborted
// room wrote.
type AbortReuse struct {
	Window          time.Duration `json:"window"`
	DeferredRelease string        `json:"deferred_release"`
}

// Name implements Analyzer.
func (*AbortReuse) Name() string { return "abort_reuse" }

func init() {
	Register(Registration{Order: 60,
		Victims: Medium,
		New: func(cfg Config) Analyzer {
			return &AbortReuse{Window: cfg.AbortReuseWindow, DeferredRelease: cfg.DeferredRelease}
		}})
}

// Version implements Analyzer.
func (*AbortReuse) Version() string { return "5" }

// Params implements Analyzer.
func (a *AbortReuse) Params() any { return a }

// secondSlack: lines without milliseconds are up to a second early.
const secondSlack = time.Second

// Analyze implements Analyzer.
func (a *AbortReuse) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

// abortCase is one decode-side abort mid-transfer and the requests
// allocated on its rank around it (in allocation order): found slice by
// slice, judged after them, when the one allocator replay of the window
// can say which candidates were handed the aborted room's pages. A case
// holds what the judgement reads, not the linked requests: the cases of
// every slice wait until the end (on local disk since session 38:
// abortSpill), and at 2M requests holding their requests' lines was most
// of what grew with the window.
type abortCase struct {
	t     *TransferEvent
	src   abortSrc
	rank  int16
	cands []abortCand
	// released is when the aborted room's pages went back to the free
	// list after a deferred release timed out (Unix nanoseconds, 0: no
	// such line) and releasedLine that line: with
	// SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE on, decode holds an
	// aborted request's pages until every prefill rank acks the drain of
	// its transfer, and after 30 s releases them anyway (decode.py
	// resolve_deferred_releases, sglang #35049). Then the mitigation did
	// not hold: a write still in flight lands in pages handed out after
	// that moment.
	released     int64
	releasedLine uint64
}

// abortSrc is the aborted request.
type abortSrc struct {
	key, gwID, tenant string
	lines             []uint64
}

// abortCand is a request allocated on the aborted rank around the abort
// that finished after it, with what its finding is drafted from (the
// fields Request.Finding fills). Not the drafted Finding itself: cases are
// held until the end of the window, and at 10M requests (about 550,000
// candidates) a Finding per candidate (about 1 KB with its details map)
// was most of what grew. Times are Unix nanoseconds (0: none). Since
// session 38 the cases wait in a file (abortSpill), a candidate in 234
// bytes of it (BenchmarkAbortCase), and only the case being judged is
// decoded; while they were held in the heap their node, tenant and link
// strings were interned, which the spill made needless.
type abortCand struct {
	room            uint64
	at, end         int64 // decode receive and end
	ts, first, last int64
	rank            int16
	success         bool // the client was told it succeeded
	key, gwID       string
	tenant          string
	prefill, decode string
	links           string
	rids            []string
	lines           []uint64
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func newAbortCand(v *Fact) abortCand {
	fd := v.Finding() // the one definition of a request's finding fields
	return abortCand{room: v.Room, at: unixNano(v.Decode.TS()), end: unixNano(v.Decode.End()), success: v.ClientSuccess(),
		rank: fd.DecodeDPRank, key: fd.RequestKey, gwID: fd.GatewayRequestID, tenant: fd.Tenant,
		prefill: fd.PrefillNode, decode: fd.DecodeNode, links: fd.Details["links"],
		ts: unixNano(fd.TS), first: unixNano(fd.FirstTS), last: unixNano(fd.LastTS), rids: fd.RIDs, lines: fd.Evidence}
}

// finding drafts the candidate's finding (Request.Finding's fields).
func (v *abortCand) finding() Finding {
	return Finding{TS: fromUnixNano(v.ts), FirstTS: fromUnixNano(v.first), LastTS: fromUnixNano(v.last), RequestKey: v.key,
		GatewayRequestID: v.gwID, Tenant: v.tenant, Room: v.room, RIDs: v.rids, Evidence: slices.Clone(v.lines),
		DecodeDPRank: v.rank, PrefillNode: v.prefill, DecodeNode: v.decode, Details: map[string]string{"links": v.links}}
}

// newAbortCase makes the case of abort t of src on rank from the
// requests allocated around it (lane order kept); requests that cannot
// have received the late write (the aborted request, one of its room, one
// that ended before the abort) are left out.
func newAbortCase(t *TransferEvent, src *Fact, rank int16, around []*Fact) abortCase {
	cand := func(v *Fact) bool { return v != src && v.Room != t.Room && v.Decode.End().After(t.TS) }
	n := 0
	for _, v := range around {
		if cand(v) {
			n++
		}
	}
	// Held to the end of the window: exactly as many as there are (most
	// requests around an abort ended before it).
	c := abortCase{t: t, src: abortSrc{key: src.Key, gwID: src.RequestID(), tenant: src.Tenant, lines: src.Lines()}, rank: rank,
		cands: make([]abortCand, 0, n)}
	for _, v := range around {
		if cand(v) {
			c.cands = append(c.cands, newAbortCand(v))
		}
	}
	return c
}

// abortPass gathers the aborts of each slice (the slice that owns the
// abort's time takes it; its linked requests reach sliceContext around
// it) and judges them at the end.
type abortPass struct {
	a     *AbortReuse
	cases abortSpill // on local disk until the conclusion (abort_spill.go)
}

func (a *AbortReuse) newPass() pass { return &abortPass{a: a} }

func (p *abortPass) slice(_ context.Context, d *Dataset) ([]Finding, error) {
	// Decode requests per node/rank in allocation order.
	lanes := map[string][]*Fact{}
	for _, f := range d.linked {
		if f.Decode != nil && f.Decode.DPRank >= 0 && !f.Decode.TS().IsZero() {
			k := fmt.Sprintf("%s/%d", f.Decode.Node, f.Decode.DPRank)
			lanes[k] = append(lanes[k], f)
		}
	}
	// Allocation order is the decode engine's receive order; sorted, each
	// abort finds its candidates by binary search instead of scanning the
	// whole lane (at 1M requests the scan took ~30 s).
	for _, l := range lanes {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Decode.TS().Before(l[j].Decode.TS()) })
	}
	// Deferred releases that timed out, by decode node and room: the
	// first after the abort is the one that gave its pages back.
	type nodeRoom struct {
		node string
		room uint64
	}
	timedOut := map[nodeRoom][]*TransferEvent{}
	for _, t := range d.Transfer {
		if t.Event == domain.EventDeferredReleaseTimeout && t.Room != 0 {
			k := nodeRoom{t.Node, t.Room}
			timedOut[k] = append(timedOut[k], t)
		}
	}
	for _, t := range d.Transfer {
		if t.Role != "decode" || !t.Failure() || t.Room == 0 || !d.owns(t.TS) {
			continue
		}
		src := d.ByRoom[t.Room]
		if src == nil || src.Decode.Served() {
			continue // finished normally: the failure was not mid-transfer
		}
		rank := t.DPRank
		if rank < 0 && src.Decode != nil {
			rank = src.Decode.DPRank
		}
		var rel *TransferEvent
		for _, r := range timedOut[nodeRoom{t.Node, t.Room}] {
			if !r.TS.Before(t.TS.Add(-secondSlack)) && (rel == nil || r.TS.Before(rel.TS)) {
				rel = r
			}
		}
		freed := t.TS // when the pages went back to the free list
		if rel != nil {
			freed = rel.TS
		}
		l := lanes[fmt.Sprintf("%s/%d", t.Node, rank)]
		from := t.TS.Add(-p.a.Window)
		first := sort.Search(len(l), func(i int) bool { return !l[i].Decode.TS().Before(from) })
		last := first
		for last < len(l) && !l[last].Decode.TS().After(freed.Add(p.a.Window)) {
			last++
		}
		c := newAbortCase(t, src, rank, l[first:last])
		if rel != nil {
			c.released, c.releasedLine = unixNano(rel.TS), rel.Line
		}
		if err := p.cases.add(&c); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (p *abortPass) finish(ctx context.Context, d *Dataset) ([]Finding, error) {
	var all []Finding
	err := p.emit(ctx, d, func(fs []Finding) error {
		all = append(all, fs...)
		return nil
	})
	return all, err
}

// emit judges the cases one by one, as they are read back, and hands out
// each case's findings (emitter).
func (p *abortPass) emit(ctx context.Context, d *Dataset, emit func([]Finding) error) error {
	defer p.cases.close()
	a := p.a
	pr, err := d.Pages(ctx)
	if err != nil {
		return err
	}
	held, err := a.replayedHolders(ctx, d, pr, &p.cases)
	if err != nil {
		return err
	}
	return p.cases.each(func(c abortCase) error {
		var out []Finding
		t, src, rank := c.t, c.src, c.rank
		order := 0
		ruled := ruledOut{}
		exact := pr != nil && pr.Nodes[t.Node]
		released := c.released != 0
		freed := t.TS.UnixNano() // when the pages went back to the free list
		if released {
			freed = c.released
		}
		for _, v := range c.cands {
			// Requests received before the pages were freed may still have
			// been waiting in the prealloc queue and taken them then; they
			// are candidates only when the allocator replay hands them one.
			// (The replay frees a timed-out deferred release's pages at
			// the timeout, as decode does.)
			if v.at < freed-secondSlack.Nanoseconds() {
				if !slices.Contains(held[v.room], t.Room) {
					continue
				}
			}
			order++
			if h, ok := held[v.room]; ok && !exact && !slices.Contains(h, t.Room) {
				// The allocator replay gives this request none of the
				// aborted room's pages under any order (with need_sort they
				// waited on release_pages past the late write): counted in
				// the abort's one summary, not a finding of its own. It
				// keeps its place in the allocation order, so the
				// candidates after it are ranked as before.
				ruled.add(v, a.leadConfidence(order, released)*replayRuledOut)
				continue
			}
			fd := v.finding()
			fd.GroupKey = "abort:" + src.key
			fd.Subject = fd.RequestKey + "/abort/" + src.key
			fd.ForeignRequestKeys = []string{src.key}
			if src.tenant != "" && src.tenant != fd.Tenant {
				fd.ForeignTenants = []string{src.tenant}
			}
			fd.Evidence = append(fd.Evidence, t.Line)
			fd.Evidence = append(fd.Evidence, src.lines...)
			switch {
			case exact:
				r := pr.Reads[v.room]
				if r == nil || r.Stale[t.Room] == 0 {
					continue
				}
				fd.Severity, fd.Confidence = High, 1
				fd.Evidence = append(fd.Evidence, r.Lines...)
				fd.Details["stale_pages_from_aborted_room"] = fmt.Sprint(r.Stale[t.Room])
			default:
				fd.Confidence = a.leadConfidence(order, released)
				// Only a deployment known to run with deferred release off,
				// or a release that timed out, makes a candidate worth
				// notifying on (MEDIUM: it enters the affected list);
				// otherwise it stays a LOW lead.
				fd.Severity = Low
				if v.success && fd.Confidence >= 0.25 && (a.DeferredRelease == "off" || released) {
					fd.Severity = Medium
				}
			}
			if !v.success && fd.Severity == High {
				fd.Severity = Medium
			}
			fd.Title = fmt.Sprintf("may have received the in-flight KV of aborted room %d", t.Room)
			if released {
				rel := fromUnixNano(c.released)
				when := fmt.Sprintf("was received on the same rank %s after that release", fromUnixNano(v.at).Sub(rel).Round(time.Millisecond))
				if v.at < c.released {
					when = fmt.Sprintf("was received on the same rank %s before that release and, by the allocator replay, was handed the aborted room's pages at it",
						rel.Sub(fromUnixNano(v.at)).Round(time.Millisecond))
				}
				fd.Explanation = fmt.Sprintf("%s rank %d aborted bootstrap_room %d (%s, tenant %s) at %s while its transfer was in flight (%s). "+
					"Deferred KV release held its pages, but timed out at %s and released them without the prefill's drain ack; "+
					"this request (tenant %s) %s, allocation #%d after it, and finished at %s. "+
					"Its pages may have received a write still in flight.",
					t.Node, rank, t.Room, src.key, src.tenant, fmtTime(t.TS), t.Reason, fmtTime(rel), fd.Tenant,
					when, order, fmtTime(fromUnixNano(v.end)))
				fd.Evidence = append(fd.Evidence, c.releasedLine)
				fd.Details["deferred_release_timed_out_at"] = fmtTime(rel)
			} else {
				fd.Explanation = fmt.Sprintf("%s rank %d aborted bootstrap_room %d (%s, tenant %s) at %s while its transfer was in flight (%s); "+
					"this request (tenant %s) was allocated on the same rank %s later, allocation #%d after the abort, and finished at %s. "+
					"With deferred release off its pages may have received the late write.",
					t.Node, rank, t.Room, src.key, src.tenant, fmtTime(t.TS), t.Reason, fd.Tenant,
					fromUnixNano(v.at).Sub(t.TS).Round(time.Millisecond), order, fmtTime(fromUnixNano(v.end)))
			}
			if exact {
				fd.Explanation += fmt.Sprintf(" Page events confirm it read %s pages last written by the aborted room.", fd.Details["stale_pages_from_aborted_room"])
			}
			fd.Details["aborted_room"] = itoa(t.Room)
			fd.Details["order_after_abort"] = fmt.Sprint(order)
			out = append(out, fd)
		}
		if ruled.n > 0 {
			out = append(out, ruled.finding(t, src, rank))
		}
		return emit(out)
	})
}

// leadConfidence is the confidence of the order-th allocation after an
// abort without page events: earlier allocations are likelier to have
// been handed the freed pages.
// A release that timed out is no mitigation: its order counts from it.
func (a *AbortReuse) leadConfidence(order int, released bool) float64 {
	c := 0.6 / float64(order)
	if a.DeferredRelease == "on" && !released {
		c *= 0.2
	}
	return c
}

// replayRuledOut scales the confidence of a candidate the allocator replay
// hands none of the aborted room's pages: the replay models SGLang's
// allocator, not every event it logs, so the candidate is unlikely, not
// impossible.
const replayRuledOut = 0.1

// ruledOutListed is how many of an abort's ruled-out candidates its
// summary names; the rest are counted. At scale 100 an abort had up to
// hundreds of them, and one finding per candidate was 87% of all findings
// (docs/analyzers.md).
const ruledOutListed = 20

// ruledOut gathers the candidates of one abort that the allocator replay
// rules out.
type ruledOut struct {
	n          int
	conf       float64 // the highest of theirs
	keys       []string
	first, end int64 // first allocation and last end among them
}

func (r *ruledOut) add(v abortCand, conf float64) {
	if r.n == 0 || v.at < r.first {
		r.first = v.at
	}
	r.end = max(r.end, v.end)
	r.n++
	r.conf = max(r.conf, conf)
	if len(r.keys) < ruledOutListed {
		r.keys = append(r.keys, v.key)
	}
}

// finding is the abort's one LOW summary of its ruled-out candidates,
// about the aborted request (where did its late write go?) in the abort's
// group. Its request is the aborted one (its gateway id, when the gateway
// logged it, links the finding to that request's page); it names no
// receiving request and is LOW, so it marks no victim. The candidates it
// lists are in its details, not its keys, as a JSON array: request keys
// are gateway ids, which may hold any character, commas too.
func (r *ruledOut) finding(t *TransferEvent, src abortSrc, rank int16) Finding {
	last := t.TS
	if e := fromUnixNano(r.end); e.After(last) {
		last = e
	}
	named := strings.Join(r.keys, ", ")
	if more := r.n - len(r.keys); more > 0 {
		named += fmt.Sprintf(" and %d more", more)
	}
	return Finding{TS: t.TS, FirstTS: t.TS, LastTS: last,
		RequestKey: src.key, GatewayRequestID: src.gwID, Tenant: src.tenant, Room: t.Room, DecodeNode: t.Node, DecodeDPRank: rank,
		GroupKey: "abort:" + src.key, Subject: src.key + "/abort/ruled-out",
		Evidence: append([]uint64{t.Line}, src.lines...), Severity: Low, Confidence: r.conf,
		Title: fmt.Sprintf("aborted room %d mid-transfer: %d later allocations ruled out by the allocator replay", t.Room, r.n),
		Explanation: fmt.Sprintf("%s rank %d aborted bootstrap_room %d (%s, tenant %s) at %s while its transfer was in flight (%s). "+
			"%d requests allocated on the same rank around it (the first at %s) were still running after it; the allocator replay hands none of them the aborted room's pages "+
			"under any event order (with need_sort the pages wait on release_pages past the late write), so none is a candidate of its own: %s.",
			t.Node, rank, t.Room, src.key, src.tenant, fmtTime(t.TS), t.Reason, r.n, fmtTime(fromUnixNano(r.first)), named),
		Details: map[string]string{"aborted_room": itoa(t.Room), "ruled_out": fmt.Sprint(r.n),
			"ruled_out_requests": jsonList(r.keys),
			"replay":             "aborted room's pages handed to none of these requests"}}
}

// jsonList is a detail value listing free-form strings: a JSON array.
// Marshalling a []string cannot fail (invalid UTF-8 becomes U+FFFD).
func jsonList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// replayedHolders replays the decode allocator (replay.go) for every
// abort candidate on a node without page events and returns, per
// candidate room, the aborted rooms that held its pages before it under
// some event order. A candidate missing from the result could not be
// replayed.
func (a *AbortReuse) replayedHolders(ctx context.Context, d *Dataset, pr *pageReplay, cases *abortSpill) (map[uint64][]uint64, error) {
	var cands []uint64
	aborted := map[uint64]bool{}
	// A candidate of several aborts comes once per abort: the list drops
	// its repeats whenever it has doubled, so it stays within about twice
	// the candidates.
	compactAt := 1 << 16
	err := cases.each(func(c abortCase) error {
		if pr != nil && pr.Nodes[c.t.Node] {
			return nil
		}
		aborted[c.t.Room] = true
		for _, v := range c.cands {
			if v.room != 0 {
				cands = append(cands, v.room)
			}
		}
		if len(cands) >= compactAt {
			cands = roomsOf(cands)
			compactAt = max(compactAt, 2*len(cands))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d.heldBy(ctx, slices.Clone(roomsOf(cands)), aborted) // the clone leaves the spare capacity behind
}
