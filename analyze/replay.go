package analyze

import (
	"context"
	"fmt"
	"math/bits"
	"sort"
	"time"
)

// Allocator replay: without page-level events, a decode rank's page
// contents are estimated by replaying its allocator from the engine's own
// lines. SGLang's paged allocator keeps free pages sorted in PD mode and
// hands out the lowest ones first; a request reserves ceil((prompt +
// output)/page_size) pages when decode receives it and releases them when
// it finishes. A normal request writes all its pages; a placeholder
// request (§c1) writes only its first page and its output; a request
// aborted mid-transfer writes nothing of its own.

// estRequest is one decode-side request in the replay.
type estRequest struct {
	room        uint64
	node        string
	rank        int16
	alloc       time.Time
	free        time.Time
	pages       int
	promptPgs   int
	ownWrites   bool // false: aborted before its KV landed
	placeholder bool
}

// Estimate is the estimated lineage of one request's reserved pages.
type Estimate struct {
	Room  uint64
	Pages int
	// Sources: estimated last writer room -> pages of the prompt range.
	Sources map[uint64]int
	Never   int
}

const decodeEventsSQL = `SELECT node, event, rid, bootstrap_room, ts_ns, prompt_tokens, completion_tokens, finish_type, line_id
FROM engine_events
WHERE role = 'decode' AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND event IN ('received', 'finished')
ORDER BY ts_ns, line_id`

// estimateLineage replays every decode rank from replayStart to the window
// end and returns the estimated lineage of the requested rooms.
func estimateLineage(ctx context.Context, d *Dataset, placeholder, noWrite map[uint64]bool, want map[uint64]bool) (map[uint64]*Estimate, map[uint64]*estRequest, error) {
	rows, err := d.DB.Query(ctx, decodeEventsSQL, unix(d.replayStart()), unix(d.Window.To.Add(d.Cfg.LinkMargin)))
	if err != nil {
		return nil, nil, fmt.Errorf("load decode events for replay: %w", err)
	}
	defer rows.Close()
	reqs := map[string]*estRequest{}
	byRoom := map[uint64]*estRequest{}
	seen := map[uint64]bool{}
	for rows.Next() {
		var (
			node, event, rid, fin string
			room, ns, p, c, line  uint64
		)
		if err := rows.Scan(&node, &event, &rid, &room, &ns, &p, &c, &fin, &line); err != nil {
			return nil, nil, fmt.Errorf("scan decode event: %w", err)
		}
		if seen[line] || room == 0 {
			continue
		}
		seen[line] = true
		ts := time.Unix(0, int64(ns)).UTC()
		k := nodeRID(node, rid)
		r := reqs[k]
		if r == nil {
			r = &estRequest{room: room, node: node, rank: -1, ownWrites: true}
			reqs[k] = r
			byRoom[room] = r
		}
		switch event {
		case "received":
			if r.alloc.IsZero() {
				r.alloc = ts
			}
		case "finished":
			r.free = ts
			b := d.Boots.At(node, ts)
			ps := uint64(64)
			if b != nil && b.PageSize > 0 {
				ps = b.PageSize
			}
			r.pages = int((p + c + ps - 1) / ps)
			r.promptPgs = int((p + ps - 1) / ps)
			if fin == "abort" && c == 0 {
				r.ownWrites = false
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read decode events: %w", err)
	}
	type evt struct {
		at    time.Time
		alloc bool
		r     *estRequest
	}
	lanes := map[string][]evt{}
	for _, r := range reqs {
		if r.alloc.IsZero() || r.pages == 0 {
			continue
		}
		b := d.Boots.At(r.node, r.alloc)
		if b == nil || !b.FollowsRoom() {
			continue
		}
		r.rank = int16(r.room % b.DPSize)
		r.placeholder = placeholder[r.room]
		if noWrite[r.room] {
			r.ownWrites = false
		}
		if r.free.IsZero() || r.free.Before(r.alloc) {
			r.free = r.alloc.Add(10 * time.Minute)
		}
		lane := fmt.Sprintf("%s/%d/%s", r.node, r.rank, b.ID)
		lanes[lane] = append(lanes[lane], evt{r.alloc, true, r}, evt{r.free, false, r})
	}
	out := map[uint64]*Estimate{}
	names := make([]string, 0, len(lanes))
	for n := range lanes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		evs := lanes[name]
		// Frees before allocations at the same instant (second-granular
		// logs): pages released in that second are reused first.
		sort.Slice(evs, func(i, j int) bool {
			if !evs[i].at.Equal(evs[j].at) {
				return evs[i].at.Before(evs[j].at)
			}
			if evs[i].alloc != evs[j].alloc {
				return !evs[i].alloc
			}
			return evs[i].r.room < evs[j].r.room
		})
		first := evs[0].r
		b := d.Boots.At(first.node, first.alloc)
		npages := int(b.MaxTotalTokens / max(b.PageSize, 1))
		if npages <= 0 {
			continue
		}
		pool := newEstPool(npages)
		held := map[*estRequest][]int32{}
		for _, e := range evs {
			r := e.r
			if !e.alloc {
				if pg, ok := held[r]; ok {
					pool.release(pg)
					delete(held, r)
				}
				continue
			}
			pg := pool.alloc(r.pages)
			if pg == nil {
				continue
			}
			held[r] = pg
			if want[r.room] {
				est := &Estimate{Room: r.room, Pages: len(pg), Sources: map[uint64]int{}}
				lo := 0
				if r.placeholder {
					lo = 1
				}
				for _, p := range pg[lo:min(r.promptPgs, len(pg))] {
					if w := pool.writer[p]; w == 0 {
						est.Never++
					} else if w != r.room {
						est.Sources[w]++
					}
				}
				out[r.room] = est
			}
			switch {
			case !r.ownWrites:
			case r.placeholder:
				pool.write(pg[:1], r.room)
				pool.write(pg[min(r.promptPgs, len(pg)):], r.room)
			default:
				pool.write(pg, r.room)
			}
		}
	}
	return out, byRoom, nil
}

// estPool is a lowest-first page allocator (page 0 is SGLang's reserved
// padding page). simulate/allocator.go models the same allocator; the two
// are kept apart on purpose: this is the analyzer's own reading of SGLang's
// behaviour, and sharing code with the simulator would let one mistake
// make the accuracy tests agree with themselves.
type estPool struct {
	free   []uint64
	nfree  int
	writer []uint64
}

func newEstPool(n int) *estPool {
	p := &estPool{free: make([]uint64, (n+1+63)/64), writer: make([]uint64, n+1), nfree: n}
	for i := 1; i <= n; i++ {
		p.free[i>>6] |= 1 << (uint(i) & 63)
	}
	return p
}

func (p *estPool) alloc(n int) []int32 {
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

func (p *estPool) release(pages []int32) {
	for _, pg := range pages {
		w, b := pg>>6, uint(pg)&63
		if p.free[w]&(1<<b) == 0 {
			p.free[w] |= 1 << b
			p.nfree++
		}
	}
}

func (p *estPool) write(pages []int32, room uint64) {
	for _, pg := range pages {
		p.writer[pg] = room
	}
}
