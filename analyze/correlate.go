package analyze

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Side is one engine's view of a request (prefill or decode).
type Side = domain.Side

// Fact is one client request linked across gateway, prefill, transfer and
// decode (domain.Request).
type Fact = domain.Request

// nodeMap maps gateway endpoints to node names.
type nodeMap struct {
	byHost map[string]string
}

func (m nodeMap) node(ep string) string {
	if ep == "" {
		return ""
	}
	if n, ok := m.byHost[ep]; ok {
		return n
	}
	return m.byHost[endpointHost(ep)]
}

// buildNodeMap learns which node an endpoint names: from explicit
// endpoints (the sources manifest), from server_args host=, and from the
// prefill hosts that decode Receive lines name (bootstrap_host): votes
// counts, per host, the Receive lines of each prefill node that carry it
// (a prefill node's own Receive lines carry bootstrap_host = its host),
// counted by the store over the whole read so every slice of a window
// maps endpoints alike.
func buildNodeMap(explicit map[string]string, boots *Boots, votes map[string]map[string]int) nodeMap {
	m := nodeMap{byHost: map[string]string{}}
	for ep, n := range explicit {
		m.byHost[ep] = n
		if h := endpointHost(ep); h != "" {
			m.byHost[h] = n
		}
	}
	for node, list := range boots.ByNode {
		for _, b := range list {
			if h := b.Host(); h != "" && h != "0.0.0.0" && h != "127.0.0.1" {
				if _, ok := m.byHost[h]; !ok {
					m.byHost[h] = node
				}
			}
		}
	}
	for h, v := range votes {
		if _, ok := m.byHost[h]; ok {
			continue
		}
		best, bn := "", 0
		for n, c := range v {
			if c > bn || (c == bn && n < best) {
				best, bn = n, c
			}
		}
		m.byHost[h] = best
	}
	return m
}

// correlator links rows into Facts.
type correlator struct {
	boots    *Boots
	nodes    nodeMap
	byRoom   map[uint64][]*EngineEvent
	byNodeID map[nodeRID][]*EngineEvent
	xfer     map[uint64][]*TransferEvent
	corrupt  map[uint64][]*TransferEvent
	// xferByRID holds the transfer lines that name a rid, for requests of
	// a shared room (domain.RoomLines).
	xferByRID map[string][]*TransferEvent
	// reused holds the responses keyed by id and line (reusedIDs).
	reused map[*GatewayResponse]bool
}

// reusedKey is the key of a response whose request id another request
// reused: the id and the response's line, so each is its own request.
func reusedKey(g *GatewayResponse) string { return domain.ReusedKey(g.RequestID, g.Line) }

// reusedIDs returns the responses whose request id another response,
// within reuse of it, carries for another request: a client-supplied id
// reused. Keyed by the id alone, the two were one request to the analysis
// (its lookups by key) and, for one tenant, one request_facts row (keyed
// by tenant and id). The same response logged twice (two gateways, or a
// line ingested from two files) names the same room and rids and stays
// one request. Bounded in time so a slice, which links the requests
// within its context of its own, decides as the whole window does; a
// reuse farther apart is not seen.
func reusedIDs(gw []*GatewayResponse, reuse time.Duration) map[*GatewayResponse]bool {
	if reuse <= 0 {
		return nil
	}
	first := make(map[string]*GatewayResponse, len(gw))
	var again map[string]bool
	for _, g := range gw {
		if g.RequestID == "" {
			continue
		}
		if _, ok := first[g.RequestID]; ok {
			if again == nil {
				again = map[string]bool{}
			}
			again[g.RequestID] = true
		} else {
			first[g.RequestID] = g
		}
	}
	if again == nil {
		return nil
	}
	var group []*GatewayResponse
	for _, g := range gw {
		if again[g.RequestID] {
			group = append(group, g)
		}
	}
	slices.SortFunc(group, func(a, b *GatewayResponse) int {
		if c := strings.Compare(a.RequestID, b.RequestID); c != 0 {
			return c
		}
		if c := a.TS.Compare(b.TS); c != 0 {
			return c
		}
		return cmp.Compare(a.Line, b.Line)
	})
	// Each response against those within reuse of it, in a window that
	// slides along each id's responses: a constant id on every response
	// costs a pass, not a pass per response.
	type request struct {
		tenant, prefillRID, decodeRID string
		room                          uint64
	}
	of := func(g *GatewayResponse) request { return request{g.Tenant, g.PrefillRID, g.DecodeRID, g.Room} }
	out := map[*GatewayResponse]bool{}
	for lo := 0; lo < len(group); {
		hi := lo + 1
		for hi < len(group) && group[hi].RequestID == group[lo].RequestID {
			hi++
		}
		n := map[request]int{}
		l, r := lo, lo // the window [l, r): within reuse of group[i]
		for i := lo; i < hi; i++ {
			for ; r < hi && group[r].TS.Sub(group[i].TS) <= reuse; r++ {
				n[of(group[r])]++
			}
			for ; group[i].TS.Sub(group[l].TS) > reuse; l++ {
				n[of(group[l])]--
			}
			if r-l > n[of(group[i])] {
				out[group[i]] = true
			}
		}
		lo = hi
	}
	return out
}

// nodeRID keys an engine line by its node and rid: a pair, where a joined
// string allocated one per line (0.4 GB at 2M requests).
type nodeRID struct{ node, rid string }

// correlate builds one Fact per gateway response in the window, plus one
// per room seen only in engine logs (a missing gateway log must not hide a
// request). Clock skew is tolerated: rooms, not times, link the parts.
//
// A request's key is its gateway request id. Responses whose id is
// reused within reuse of each other for other requests (other rooms, or
// other rids) are keyed by id and line (reusedKey); reuse <= 0 keys every
// response by its id.
func correlate(w Window, boots *Boots, nodes nodeMap, gw []*GatewayResponse, engine []*EngineEvent, xfer []*TransferEvent, reuse time.Duration) []*Fact {
	c := newCorrelator(boots, nodes, engine, xfer)
	c.reused = reusedIDs(gw, reuse)
	facts, seenRoom := c.gatewayFacts(gw)
	facts = append(facts, c.orphanFacts(w, seenRoom)...)
	sort.SliceStable(facts, func(i, j int) bool {
		if !facts[i].TS.Equal(facts[j].TS) {
			return facts[i].TS.Before(facts[j].TS)
		}
		return facts[i].Key < facts[j].Key
	})
	return facts
}

// newCorrelator indexes the engine and transfer lines by node+rid and by
// bootstrap room.
func newCorrelator(boots *Boots, nodes nodeMap, engine []*EngineEvent, xfer []*TransferEvent) *correlator {
	// Sized for a request's usual lines (Receive and Finish on its prefill
	// and its decode node): grown from empty, the maps were rehashed on the
	// way, a quarter of their inserts' time.
	c := &correlator{boots: boots, nodes: nodes, byRoom: make(map[uint64][]*EngineEvent, len(engine)/4),
		byNodeID: make(map[nodeRID][]*EngineEvent, len(engine)/2), xfer: make(map[uint64][]*TransferEvent, len(xfer)),
		corrupt: map[uint64][]*TransferEvent{}, xferByRID: map[string][]*TransferEvent{}}
	for _, e := range engine {
		if e.RID != "" {
			k := nodeRID{e.Node, e.RID}
			c.byNodeID[k] = append(c.byNodeID[k], e)
		}
	}
	// A rejection line names only the rid: give it the room of the
	// request's Receive on the same node.
	for _, e := range engine {
		if e.Room == 0 && e.RID != "" {
			e.Room = c.roomOf(e.Node, e.RID)
		}
		if e.Room != 0 {
			c.byRoom[e.Room] = append(c.byRoom[e.Room], e)
		}
	}
	for _, t := range xfer {
		room := t.Room
		if room == 0 && t.RID != "" {
			room = c.roomOf(t.Node, t.RID)
		}
		if t.Event == "context_corruption" {
			if room != 0 {
				c.corrupt[room] = append(c.corrupt[room], t)
			}
			if t.OtherRoom != 0 && t.OtherRoom != room {
				c.corrupt[t.OtherRoom] = append(c.corrupt[t.OtherRoom], t)
			}
		}
		if room != 0 {
			c.xfer[room] = append(c.xfer[room], t)
		}
		if t.RID != "" {
			c.xferByRID[t.RID] = append(c.xferByRID[t.RID], t)
		}
	}
	return c
}

// roomOf is the bootstrap room some line of rid on node carries, 0 if none.
func (c *correlator) roomOf(node, rid string) uint64 {
	for _, o := range c.byNodeID[nodeRID{node, rid}] {
		if o.Room != 0 {
			return o.Room
		}
	}
	return 0
}

// gatewayFacts makes one fact per gateway response and links its engine
// sides; seenRoom holds the rooms the gateway logged.
func (c *correlator) gatewayFacts(gw []*GatewayResponse) (facts []*Fact, seenRoom map[uint64]bool) {
	seenRoom = map[uint64]bool{}
	for _, g := range gw {
		f := &Fact{Key: g.RequestID, TS: g.TS, GW: g, Tenant: g.Tenant, Model: g.Model, Room: g.Room,
			PrefillEP: g.PrefillEP, DecodeEP: g.DecodeEP}
		switch {
		case f.Key == "":
			f.Key = "line:" + itoa(g.Line)
		case c.reused[g]:
			f.Key = reusedKey(g)
		}
		f.Unified = g.PrefillEP == "" && g.Room == 0
		if g.Room != 0 {
			seenRoom[g.Room] = true
		}
		c.link(f, g.PrefillRID, g.DecodeRID)
		facts = append(facts, f)
	}
	return facts, seenRoom
}

// orphanFacts makes facts for rooms seen only by engines (the gateway log
// missing or gapped) whose first line falls in w.
func (c *correlator) orphanFacts(w Window, seenRoom map[uint64]bool) []*Fact {
	var orphan []uint64
	for room, evs := range c.byRoom {
		if seenRoom[room] {
			continue
		}
		first := evs[0].TS
		for _, e := range evs {
			if e.TS.Before(first) {
				first = e.TS
			}
		}
		if w.Contains(first) {
			orphan = append(orphan, room)
		}
	}
	sort.Slice(orphan, func(i, j int) bool { return orphan[i] < orphan[j] })
	var facts []*Fact
	for _, room := range orphan {
		f := &Fact{Key: "room:" + itoa(room), Room: room}
		c.link(f, "", "")
		if f.Prefill == nil && f.Decode == nil {
			continue
		}
		f.TS = f.FirstTS()
		facts = append(facts, f)
	}
	return facts
}

func (c *correlator) link(f *Fact, prefillRID, decodeRID string) {
	var evs []*EngineEvent
	shared := false
	if f.Room != 0 {
		evs = c.byRoom[f.Room]
		// A room naming more than domain.RoomLines lines is shared by
		// many requests: a gateway response under it takes its lines by
		// its rids alone (reading the room's lines whole for each of its
		// n requests took n² steps: 20,000 requests 143 s, a slice of
		// 100,000 about an hour); without rids it cannot tell its lines
		// from the others' and links none. A room the gateway did not log
		// is linked once (orphanFacts), so its lines are read whole.
		if len(evs) > domain.RoomLines && f.GW != nil {
			evs, shared = nil, true
		}
	}
	wantP, wantD := c.nodes.node(f.PrefillEP), c.nodes.node(f.DecodeEP)
	ridP, ridD := prefillRID, decodeRID
	if f.Unified {
		// Non-PD worker: the decode endpoint is the whole engine.
		wantP, wantD = wantD, ""
		ridP, ridD = decodeRID, ""
		if decodeRID != "" && wantP != "" {
			evs = c.byNodeID[nodeRID{wantP, decodeRID}]
		}
	} else {
		if prefillRID != "" && wantP != "" {
			evs = append(evs, c.byNodeID[nodeRID{wantP, prefillRID}]...)
		}
		if decodeRID != "" && wantD != "" {
			evs = append(evs, c.byNodeID[nodeRID{wantD, decodeRID}]...)
		}
	}
	if f.Room == 0 && len(evs) == 0 {
		return
	}
	f.Prefill = c.side(evs, wantP, ridP, func(e *EngineEvent) bool { return e.Role == "prefill" || e.Role == "unified" })
	if !f.Unified {
		f.Decode = c.side(evs, wantD, ridD, func(e *EngineEvent) bool { return e.Role == "decode" })
	}
	if f.Room == 0 {
		return
	}
	if !shared {
		f.Transfer = c.xfer[f.Room]
		f.Corrupt = c.corrupt[f.Room]
		return
	}
	rids := [2]string{prefillRID, decodeRID}
	if decodeRID == prefillRID {
		rids[1] = ""
	}
	for _, rid := range rids {
		if rid == "" {
			continue
		}
		for _, t := range c.xferByRID[rid] {
			if t.Event == "context_corruption" {
				f.Corrupt = append(f.Corrupt, t)
			} else {
				f.Transfer = append(f.Transfer, t)
			}
		}
	}
}

// side picks one engine's events: the wanted node if it logged the room,
// else the node with the most events (deterministic on ties).
//
// rid is the request's rid on that side as the gateway logged it: when
// the chosen node's lines carry it and another rid too (two requests
// under one room), only its own lines and those naming no rid are taken.
func (c *correlator) side(evs []*EngineEvent, want, rid string, role func(*EngineEvent) bool) *Side {
	count := map[string]int{}
	for _, e := range evs {
		if role(e) {
			count[e.Node]++
		}
	}
	if len(count) == 0 {
		return nil
	}
	node := want
	if count[node] == 0 {
		node = ""
		for n, k := range count {
			if node == "" || k > count[node] || (k == count[node] && n < node) {
				node = n
			}
		}
	}
	only := ""
	var first string
	own, other := false, false
	for _, e := range evs {
		if e.Node != node || e.RID == "" || !role(e) {
			continue
		}
		if first == "" {
			first = e.RID
		}
		own = own || (rid != "" && e.RID == rid)
		other = other || e.RID != first || (rid != "" && e.RID != rid)
	}
	switch {
	case own && other:
		only = rid
	case rid == "" && first != "" && other:
		// Two requests under one room on this node and no rid to tell
		// which is this one: taking the first would give one request's
		// lines to both.
		return nil
	}
	s := &Side{Node: node, DPRank: -1}
	seen := map[uint64]bool{}
	for _, e := range evs {
		if e.Node != node || !role(e) || seen[e.Line] || (only != "" && e.RID != "" && e.RID != only) {
			continue
		}
		seen[e.Line] = true
		switch e.Event {
		case "received", "received_openai":
			if s.Recv == nil {
				s.Recv = e
			}
		case "finished", "request_metrics":
			if s.Fin == nil || (e.Event == "finished" && s.Fin.Event != "finished") {
				s.Fin = e
			}
		case "rejected", "capacity_exceeded", "expand_exceeded":
			if s.Rejected == nil {
				s.Rejected = e
			}
		}
		if s.RID == "" && e.RID != "" {
			s.RID = e.RID
		}
		if s.DPRank < 0 && e.DPRank >= 0 && e.Event != "received" && e.Event != "finished" {
			s.DPRank = e.DPRank
		}
	}
	s.Boot = c.boots.At(node, s.TS())
	if s.DPRank < 0 && s.Boot != nil && s.Boot.FollowsRoom() && len(evs) > 0 && evs[0].Room != 0 {
		s.DPRank = int16(evs[0].Room % s.Boot.DPSize)
	}
	return s
}

// factBatch is how many linked requests Correlate gathers before saving
// them in one go.
const factBatch = 50_000
