package analyze

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Side is one engine's view of a request (prefill or decode).
type Side struct {
	Node     string
	RID      string
	DPRank   int16 // -1 when unknown
	Recv     *EngineEvent
	Fin      *EngineEvent
	Boot     *Boot
	Rejected *EngineEvent // input-too-long / capacity rejection line (§c1, §c3)
}

// TS is when the engine first saw the request.
func (s *Side) TS() time.Time {
	switch {
	case s == nil:
		return time.Time{}
	case s.Recv != nil:
		return s.Recv.TS
	case s.Fin != nil:
		return s.Fin.TS
	}
	return time.Time{}
}

// End is when the engine finished the request (zero if no Finish line).
func (s *Side) End() time.Time {
	if s == nil || s.Fin == nil {
		return time.Time{}
	}
	return s.Fin.TS
}

// Prompt is the prompt length the engine reported at Finish.
func (s *Side) Prompt() uint64 {
	if s == nil || s.Fin == nil {
		return 0
	}
	return s.Fin.Prompt
}

// Served reports a Finish that was not an abort.
func (s *Side) Served() bool {
	return s != nil && s.Fin != nil && !s.Fin.Aborted()
}

func (s *Side) lines() []uint64 {
	if s == nil {
		return nil
	}
	var out []uint64
	for _, e := range []*EngineEvent{s.Recv, s.Fin, s.Rejected} {
		if e != nil {
			out = append(out, e.Line)
		}
	}
	return out
}

// Fact is one client request linked across gateway, prefill, transfer and
// decode. Any link may be missing; Links says which were found.
type Fact struct {
	Key       string
	TS        time.Time
	GW        *GatewayResponse
	Tenant    string
	Model     string
	Room      uint64
	Prefill   *Side
	Decode    *Side
	Transfer  []*TransferEvent
	Corrupt   []*TransferEvent // context corruption lines naming this room (either side)
	Unified   bool
	PrefillEP string
	DecodeEP  string
}

// Links names the parts that were found, e.g. "gateway+prefill+decode".
func (f *Fact) Links() string {
	var p []string
	if f.GW != nil {
		p = append(p, "gateway")
	}
	if f.Prefill != nil {
		p = append(p, "prefill")
	}
	if len(f.Transfer) > 0 {
		p = append(p, "transfer")
	}
	if f.Decode != nil {
		p = append(p, "decode")
	}
	return strings.Join(p, "+")
}

// Status is the client's HTTP status (0 when no gateway line).
func (f *Fact) Status() uint16 {
	if f.GW == nil {
		return 0
	}
	return f.GW.Status
}

// ClientSuccess reports that the client was told the request succeeded:
// the gateway's 200 with completion tokens, or (no gateway line) a normal
// decode Finish with completion tokens.
func (f *Fact) ClientSuccess() bool {
	if f.GW != nil {
		return f.GW.Status == 200 && f.GW.Completion > 0
	}
	return f.Decode.Served() && f.Decode.Fin.Completion > 0
}

// PromptTokens is the full prompt length: the larger of what the gateway
// and the decode engine reported (the prefill may have seen a placeholder).
func (f *Fact) PromptTokens() uint64 {
	var p uint64
	if f.GW != nil {
		p = f.GW.Prompt
	}
	if d := f.Decode.Prompt(); d > p {
		p = d
	}
	return p
}

// Completion is the completion tokens the client got (gateway, else decode).
func (f *Fact) Completion() uint64 {
	if f.GW != nil {
		return f.GW.Completion
	}
	if f.Decode != nil && f.Decode.Fin != nil {
		return f.Decode.Fin.Completion
	}
	return 0
}

// RequestID is the gateway request id, or the key when unknown.
func (f *Fact) RequestID() string {
	if f.GW != nil {
		return f.GW.RequestID
	}
	return ""
}

// RIDs lists the engine rids.
func (f *Fact) RIDs() []string {
	var out []string
	for _, s := range []*Side{f.Prefill, f.Decode} {
		if s != nil && s.RID != "" {
			out = append(out, s.RID)
		}
	}
	return out
}

// Lines lists the raw lines behind the fact.
func (f *Fact) Lines() []uint64 {
	var out []uint64
	if f.GW != nil {
		out = append(out, f.GW.Line)
	}
	out = append(out, f.Prefill.lines()...)
	out = append(out, f.Decode.lines()...)
	for _, t := range f.Transfer {
		out = append(out, t.Line)
	}
	for _, t := range f.Corrupt {
		out = append(out, t.Line)
	}
	return uniqSortedU64(out)
}

// PrefillRejected reports evidence that the prefill scheduler rejected or
// aborted the request: a rejection line, an abort finish, or a Finish with
// a 1-token prompt while the client sent more (the §c1 placeholder).
func (f *Fact) PrefillRejected() (bool, string) {
	p := f.Prefill
	if p == nil {
		return false, ""
	}
	if p.Rejected != nil {
		return true, "rejection line"
	}
	if p.Fin != nil && p.Fin.Aborted() {
		return true, "abort finish (" + p.Fin.FinishMsg + ")"
	}
	if p.Fin != nil && p.Fin.Prompt == 1 && f.PromptTokens() > 1 {
		return true, "prefill Finish with prompt_tokens=1 (placeholder)"
	}
	return false, ""
}

func (f *Fact) firstTS() time.Time {
	t := f.TS
	for _, s := range []*Side{f.Prefill, f.Decode} {
		if x := s.TS(); !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	return t
}

func (f *Fact) lastTS() time.Time {
	t := f.TS
	if f.GW != nil {
		t = f.GW.TS.Add(time.Duration(f.GW.DurationMS * float64(time.Millisecond)))
	}
	for _, s := range []*Side{f.Prefill, f.Decode} {
		if x := s.End(); x.After(t) {
			t = x
		}
	}
	return t
}

// finding starts a finding about this request.
func (f *Fact) finding() Finding {
	fd := Finding{
		TS: f.TS, FirstTS: f.firstTS(), LastTS: f.lastTS(), RequestKey: f.Key, GatewayRequestID: f.RequestID(),
		Tenant: f.Tenant, Room: f.Room, RIDs: f.RIDs(), Evidence: f.Lines(), DecodeDPRank: -1,
		Details: map[string]string{"links": f.Links()},
	}
	if f.Prefill != nil {
		fd.PrefillNode = f.Prefill.Node
	}
	if f.Decode != nil {
		fd.DecodeNode, fd.DecodeDPRank = f.Decode.Node, f.Decode.DPRank
	}
	return fd
}

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
// prefill hosts that decode Receive lines name (bootstrap_host).
func buildNodeMap(explicit map[string]string, boots *Boots, engine []*EngineEvent) nodeMap {
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
	// A prefill node's own Receive lines carry bootstrap_host = its host.
	votes := map[string]map[string]int{}
	for _, e := range engine {
		if e.Role == "prefill" && e.BootHost != "" && e.Event == "received" {
			if votes[e.BootHost] == nil {
				votes[e.BootHost] = map[string]int{}
			}
			votes[e.BootHost][e.Node]++
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
	byNodeID map[string][]*EngineEvent // node + "\x00" + rid
	xfer     map[uint64][]*TransferEvent
	corrupt  map[uint64][]*TransferEvent
}

func nodeRID(node, rid string) string { return node + "\x00" + rid }

// correlate builds one Fact per gateway response in the window, plus one
// per room seen only in engine logs (a missing gateway log must not hide a
// request). Clock skew is tolerated: rooms, not times, link the parts.
func correlate(w Window, boots *Boots, nodes nodeMap, gw []*GatewayResponse, engine []*EngineEvent, xfer []*TransferEvent) []*Fact {
	c := newCorrelator(boots, nodes, engine, xfer)
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
	c := &correlator{boots: boots, nodes: nodes, byRoom: map[uint64][]*EngineEvent{},
		byNodeID: map[string][]*EngineEvent{}, xfer: map[uint64][]*TransferEvent{}, corrupt: map[uint64][]*TransferEvent{}}
	for _, e := range engine {
		if e.RID != "" {
			k := nodeRID(e.Node, e.RID)
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
	}
	return c
}

// roomOf is the bootstrap room some line of rid on node carries, 0 if none.
func (c *correlator) roomOf(node, rid string) uint64 {
	for _, o := range c.byNodeID[nodeRID(node, rid)] {
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
		if f.Key == "" {
			f.Key = "line:" + itoa(g.Line)
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
		f.TS = f.firstTS()
		facts = append(facts, f)
	}
	return facts
}

func (c *correlator) link(f *Fact, prefillRID, decodeRID string) {
	var evs []*EngineEvent
	if f.Room != 0 {
		evs = c.byRoom[f.Room]
	}
	wantP, wantD := c.nodes.node(f.PrefillEP), c.nodes.node(f.DecodeEP)
	if f.Unified {
		// Non-PD worker: the decode endpoint is the whole engine.
		wantP, wantD = wantD, ""
		if decodeRID != "" && wantP != "" {
			evs = c.byNodeID[nodeRID(wantP, decodeRID)]
		}
	} else {
		if prefillRID != "" && wantP != "" {
			evs = append(evs, c.byNodeID[nodeRID(wantP, prefillRID)]...)
		}
		if decodeRID != "" && wantD != "" {
			evs = append(evs, c.byNodeID[nodeRID(wantD, decodeRID)]...)
		}
	}
	if f.Room == 0 && len(evs) == 0 {
		return
	}
	f.Prefill = c.side(evs, wantP, func(e *EngineEvent) bool { return e.Role == "prefill" || e.Role == "unified" })
	if !f.Unified {
		f.Decode = c.side(evs, wantD, func(e *EngineEvent) bool { return e.Role == "decode" })
	}
	if f.Room != 0 {
		f.Transfer = c.xfer[f.Room]
		f.Corrupt = c.corrupt[f.Room]
	}
}

// side picks one engine's events: the wanted node if it logged the room,
// else the node with the most events (deterministic on ties).
func (c *correlator) side(evs []*EngineEvent, want string, role func(*EngineEvent) bool) *Side {
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
	s := &Side{Node: node, DPRank: -1}
	seen := map[uint64]bool{}
	for _, e := range evs {
		if e.Node != node || !role(e) || seen[e.Line] {
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

// ---- persistence -------------------------------------------------------

const insertFacts = `INSERT INTO request_facts (request_key, ts, ts_ns, tenant, model, gateway_request_id, bootstrap_room,
 status, prompt_tokens, completion_tokens, cached_tokens, ttft_ms, duration_ms, prefill_node, prefill_rid,
 prefill_dp_rank, prefill_prompt_tokens, prefill_finish_type, prefill_rejected, prefill_limit, decode_node,
 decode_rid, decode_dp_rank, decode_prompt_tokens, decode_finish_type, transfer_failed, transfer_reason,
 corruption, links, line_ids, version)`

// factBatch bounds one insert's rows.
const factBatch = 50_000

// SaveFacts writes facts to request_facts with the given version (a later
// build with a higher version replaces earlier rows of the same key).
func SaveFacts(ctx context.Context, db DB, facts []*Fact, version uint64) error {
	for start := 0; start < len(facts); start += factBatch {
		end := min(start+factBatch, len(facts))
		b, err := db.PrepareBatch(ctx, insertFacts)
		if err != nil {
			return fmt.Errorf("prepare request_facts insert: %w", err)
		}
		for _, f := range facts[start:end] {
			var (
				status                               uint16
				prompt, completion, cached           uint64
				ttft, dur                            float64
				pNode, pRID, pFin, dNode, dRID, dFin string
				pRank, dRank                         int16 = -1, -1
				pPrompt, pLimit, dPrompt             uint64
				rejected, failed, corrupt            uint8
				reason                               string
			)
			if g := f.GW; g != nil {
				status, prompt, completion, cached, ttft, dur = g.Status, g.Prompt, g.Completion, g.Cached, g.TTFTms, g.DurationMS
			}
			if p := f.Prefill; p != nil {
				pNode, pRID, pRank, pPrompt = p.Node, p.RID, p.DPRank, p.Prompt()
				if p.Fin != nil {
					pFin = p.Fin.FinishType
				}
				if p.Boot != nil {
					pLimit = p.Boot.Limit()
				}
			}
			if ok, _ := f.PrefillRejected(); ok {
				rejected = 1
			}
			if d := f.Decode; d != nil {
				dNode, dRID, dRank, dPrompt = d.Node, d.RID, d.DPRank, d.Prompt()
				if d.Fin != nil {
					dFin = d.Fin.FinishType
				}
				if prompt == 0 {
					prompt = dPrompt
				}
			}
			for _, t := range f.Transfer {
				if t.Failure() {
					failed, reason = 1, t.Reason
					break
				}
			}
			if len(f.Corrupt) > 0 {
				corrupt = 1
			}
			if err := b.Append(f.Key, f.TS, uint64(f.TS.UnixNano()), f.Tenant, f.Model, f.RequestID(), f.Room,
				status, prompt, completion, cached, ttft, dur, pNode, pRID, pRank, pPrompt, pFin, rejected, pLimit,
				dNode, dRID, dRank, dPrompt, dFin, failed, reason, corrupt, f.Links(), f.Lines(), version); err != nil {
				_ = b.Abort()
				return fmt.Errorf("append request fact %s: %w", f.Key, err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert request_facts: %w", err)
		}
	}
	return nil
}
