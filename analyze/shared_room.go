package analyze

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SharedRoom finds requests that shared their bootstrap room with another
// request in flight on the same prefill or decode node.
//
// SGLang keys a transfer's state by bootstrap room on both sides (read in
// sgl-project/sglang python/sglang/srt/disaggregation/mooncake/conn.py,
// main at 0005973a, 2026-12): the prefill's bootstrap_thread stores the
// decode's destination pages in transfer_infos[room][mooncake_session_id],
// its transfer_worker sends each KV chunk of a room to every entry of
// transfer_infos[kv_chunk.room], and MooncakeKVSender.poll and
// MooncakeKVReceiver.poll read check_status(bootstrap_room). Two requests in flight under one room on one
// prefill node have one's KV written into the other's pages, or the later
// destination replace the earlier (whose pages are then never written, so
// it decodes over whatever they held); on one decode node one request's
// transfer status concludes the other's. Rooms are random 63-bit numbers
// when SGLang's router makes them; a router deriving them from a request
// id that clients leave unset gives every concurrent request the same one
// (the review of ray-project/ray#63741, "Bootstrap room ID collisions").
//
// A request's time under its room is, on the prefill node, its Receive to
// its Finish (the prefill finishes once the transfer concluded), and on
// the decode node its Receive until its first token (the gateway's TTFT
// after it), or its Finish when the gateway gave none: each span on one
// node's clock, so the nodes' skew does not make overlaps. A success
// served under a shared room is HIGH: its answer may be built from
// another request's KV or from stale pages.
type SharedRoom struct{}

// Name implements Analyzer.
func (*SharedRoom) Name() string { return "shared_room" }

func init() {
	Register(Registration{Order: 85,
		Victims: High,
		New: func(Config) Analyzer {
			return &SharedRoom{}
		}})
}

// Version implements Analyzer.
func (*SharedRoom) Version() string { return "1" }

// Params implements Analyzer.
func (*SharedRoom) Params() any { return struct{}{} }

// sharedRoomPartners bounds the requests a finding names, and
// sharedRoomScan the requests searched for them on each side of a
// request: a room every concurrent request shares makes every pair of
// them a candidate, and a finding per request naming all the others
// would grow with the square of the traffic.
const (
	sharedRoomPartners = 32
	sharedRoomScan     = 4096
)

// roomSpan is one request's time under its room on one node.
type roomSpan struct {
	f        *Fact
	node     string
	from, to time.Time
}

// Analyze implements Analyzer.
func (*SharedRoom) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
	// The slice's requests with their context: a partner of a request of
	// the slice may lie just outside it.
	pool := d.linked
	if pool == nil {
		pool = d.Facts
	}
	groups := sharedRooms(pool)
	if len(groups) == 0 {
		return nil, nil
	}
	var out []Finding
	for _, f := range d.Facts {
		g, ok := groups[f.Room]
		if !ok || f.GW == nil {
			continue
		}
		partners, sides, more := overlapping(f, g)
		if len(partners) == 0 {
			continue
		}
		out = append(out, sharedRoomFinding(f, partners, sides, more))
	}
	return out, nil
}

// roomGroup is the spans of the requests under one room, by node side.
type roomGroup struct{ prefill, decode roomSide }

// roomSide is the spans of one side, sorted by start, and the longest.
type roomSide struct {
	spans   []roomSpan
	longest time.Duration
}

func (r *roomSide) add(s roomSpan) {
	r.spans = append(r.spans, s)
	r.longest = max(r.longest, s.to.Sub(s.from))
}

// spanOrder sorts spans by start, then request key.
func spanOrder(a, b roomSpan) int {
	if c := a.from.Compare(b.from); c != 0 {
		return c
	}
	return strings.Compare(a.f.Key, b.f.Key)
}

// sharedRooms groups the gateway's requests of pool by bootstrap room,
// for the rooms more than one of them names. A window of distinct rooms
// (the usual case) costs a sort of its rooms.
func sharedRooms(pool []*Fact) map[uint64]*roomGroup {
	rooms := make([]uint64, 0, len(pool))
	for _, f := range pool {
		if f.Room != 0 && f.GW != nil {
			rooms = append(rooms, f.Room)
		}
	}
	slices.Sort(rooms)
	var groups map[uint64]*roomGroup
	for i := 1; i < len(rooms); i++ {
		if rooms[i] == rooms[i-1] {
			if groups == nil {
				groups = map[uint64]*roomGroup{}
			}
			groups[rooms[i]] = &roomGroup{}
		}
	}
	if groups == nil {
		return nil
	}
	for _, f := range pool {
		g := groups[f.Room]
		if g == nil || f.GW == nil {
			continue
		}
		if s, ok := prefillSpan(f); ok {
			g.prefill.add(s)
		}
		if s, ok := decodeSpan(f); ok {
			g.decode.add(s)
		}
	}
	for _, g := range groups {
		slices.SortFunc(g.prefill.spans, spanOrder)
		slices.SortFunc(g.decode.spans, spanOrder)
	}
	return groups
}

// prefillSpan is f's time under its room on its prefill node.
func prefillSpan(f *Fact) (roomSpan, bool) {
	p := f.Prefill
	if p == nil || p.Recv == nil || p.Fin == nil || f.Unified {
		return roomSpan{}, false
	}
	return roomSpan{f: f, node: p.Node, from: p.Recv.TS, to: maxTime(p.Fin.TS, p.Recv.TS)}, true
}

// decodeSpan is f's time under its room on its decode node.
func decodeSpan(f *Fact) (roomSpan, bool) {
	dc := f.Decode
	if dc == nil || dc.Recv == nil {
		return roomSpan{}, false
	}
	to := dc.Recv.TS
	switch {
	case f.GW != nil && f.GW.TTFTMs > 0:
		to = to.Add(time.Duration(f.GW.TTFTMs * float64(time.Millisecond)))
	case dc.Fin != nil:
		to = maxTime(dc.Fin.TS, to)
	}
	return roomSpan{f: f, node: dc.Node, from: dc.Recv.TS, to: to}, true
}

// overlapping is the requests whose time under f's room on f's prefill or
// decode node overlaps f's there, nearest first and at most
// sharedRoomPartners of them, the sides they shared, and whether more
// overlapped than were named.
func overlapping(f *Fact, g *roomGroup) (partners []*Fact, sides []string, more bool) {
	seen := map[*Fact]bool{}
	for _, side := range []struct {
		name string
		r    *roomSide
		own  func(*Fact) (roomSpan, bool)
	}{{"prefill", &g.prefill, prefillSpan}, {"decode", &g.decode, decodeSpan}} {
		me, ok := side.own(f)
		if !ok {
			continue
		}
		spans := side.r.spans
		i, _ := slices.BinarySearchFunc(spans, me, spanOrder)
		found := false
		// Later starts overlap while they start before f's span ends,
		// earlier ones only if they started within the side's longest span
		// before it; each scan is bounded as well.
		// Once more than sharedRoomPartners are named and this side has one,
		// the rest change nothing.
		for j, n := i, 0; j < len(spans) && n < sharedRoomScan && !(more && found) && spans[j].from.Before(me.to); j, n = j+1, n+1 {
			found = addPartner(spans[j], me, seen, &partners, &more) || found
		}
		earliest := me.from.Add(-side.r.longest)
		for j, n := i-1, 0; j >= 0 && n < sharedRoomScan && !(more && found) && !spans[j].from.Before(earliest); j, n = j-1, n+1 {
			found = addPartner(spans[j], me, seen, &partners, &more) || found
		}
		if found {
			sides = append(sides, side.name+" "+me.node)
		}
	}
	return partners, sides, more
}

// addPartner names s's request as one of me's partners when it is
// another request on me's node whose span overlaps me's. The same
// response logged twice (two gateways) has one key: not another request.
func addPartner(s, me roomSpan, seen map[*Fact]bool, partners *[]*Fact, more *bool) bool {
	if s.f.Key == me.f.Key || s.node != me.node || !s.from.Before(me.to) || !me.from.Before(s.to) {
		return false
	}
	if !seen[s.f] {
		seen[s.f] = true
		if len(*partners) < sharedRoomPartners {
			*partners = append(*partners, s.f)
		} else {
			*more = true
		}
	}
	return true
}

// sharedRoomFinding is f's finding: the partners it shared its room with.
func sharedRoomFinding(f *Fact, partners []*Fact, sides []string, more bool) Finding {
	fd := f.Finding()
	fd.Subject = "request:" + f.Key
	fd.GroupKey = "room:" + itoa(f.Room)
	keys := make([]string, 0, len(partners))
	var tenants []string
	for _, p := range partners {
		keys = append(keys, p.Key)
		if p.Tenant != "" && p.Tenant != f.Tenant && !slices.Contains(tenants, p.Tenant) {
			tenants = append(tenants, p.Tenant)
		}
	}
	fd.ForeignRequestKeys, fd.ForeignTenants = keys, tenants
	fd.Evidence = append(fd.Evidence, partners[0].Lines()...)
	count := itoa(uint64(len(partners)))
	if more {
		count = "more than " + count
	}
	fd.Details["shared_with"] = count
	fd.Details["shared_on"] = strings.Join(sides, ", ")
	served := f.ClientSuccess()
	if served {
		fd.Severity, fd.Confidence = High, 0.7
		fd.Title = fmt.Sprintf("bootstrap room shared with %s other requests in flight, and the client got a success", count)
	} else {
		fd.Severity, fd.Confidence = Low, 0.7
		fd.Title = fmt.Sprintf("bootstrap room shared with %s other requests in flight", count)
	}
	other := "the same tenant"
	if len(tenants) > 0 {
		other = "tenants " + strings.Join(tenants, ", ")
	}
	fd.Explanation = fmt.Sprintf("request %s (tenant %s) was in flight under bootstrap_room %d on %s while %s other requests (%s, first %s) were under the same room there; "+
		"SGLang keys a transfer's destination pages and status by room, so one request's KV can land in another's pages. The client got %d with %s completion tokens.",
		f.Key, f.Tenant, f.Room, strings.Join(sides, " and "), count, other, partners[0].Key, f.Status(), commas(f.Completion()))
	return fd
}
