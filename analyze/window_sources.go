package analyze

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// neighbour is what the no-replay fallback needs of a request decoded on
// a victim's node: who it was, when, on which DP rank, and the line that
// shows it arrived. It is a few strings and numbers, not the linked
// request, so a window of them stays small.
type neighbour struct {
	key, tenant, model string
	ts                 time.Time
	rank               int16
	recv               uint64 // the decode Receive line; 0 when none
}

func neighbourOf(f *Fact, node string) (neighbour, bool) {
	if f.Decode == nil {
		return neighbour{}, false
	}
	// The fields neighbourOfRequest reads, without the summary's lists.
	s := domain.RequestSummary{Key: f.Key, Tenant: f.Tenant, Model: f.Model, TS: f.TS,
		HasDecode: true, DecodeNode: f.Decode.Node, DecodeDPRank: f.Decode.DPRank}
	if f.Decode.Recv != nil {
		s.DecodeRecv = f.Decode.Recv.Line
	}
	return neighbourOfRequest(&s, node)
}

// neighbourOfRequest is neighbourOf for a request the window knows.
func neighbourOfRequest(s *domain.RequestSummary, node string) (neighbour, bool) {
	if !s.HasDecode || s.DecodeNode != node || s.Tenant == "" {
		return neighbour{}, false
	}
	return neighbour{key: s.Key, tenant: s.Tenant, model: s.Model, ts: s.TS, rank: s.DecodeDPRank, recv: s.DecodeRecv}, true
}

// neighbourWindow slides over one decode node's requests in time order:
// victims are visited oldest first, and each asks for the windowBefore
// before it. A read covers the span not read yet, up to the last victim
// the caller says is near (so a node's sparse victims cost a few reads,
// not one each: each read of saved facts scans request_facts, whose key
// is not time); requests older than the current victim's window are
// dropped.
type neighbourWindow struct {
	d       *Dataset
	node    string
	held    []neighbour
	keys    map[string]bool
	readTo  time.Time // requests up to here (to the second) are read
	started bool
}

// upTo returns the held requests of the node in [to-windowBefore, to]
// (and perhaps a few older ones of the same second, and newer ones up to
// ahead; callers filter by time). When it must read, it reads up to ahead
// (not before to) in the same statement.
func (w *neighbourWindow) upTo(ctx context.Context, to, ahead time.Time) ([]neighbour, error) {
	from := to.Add(-windowBefore)
	drop := 0
	for drop < len(w.held) && w.held[drop].ts.Before(from) {
		delete(w.keys, w.held[drop].key)
		drop++
	}
	w.held = slices.Delete(w.held, 0, drop)
	if w.started && !w.readTo.Before(to) {
		return w.held, nil
	}
	if w.started && w.readTo.After(from) {
		from = w.readTo
	}
	to = maxTime(to, ahead)
	if err := w.read(ctx, from, to); err != nil {
		return nil, err
	}
	w.started, w.readTo = true, to
	return w.held, nil
}

func (w *neighbourWindow) read(ctx context.Context, from, to time.Time) error {
	d := w.d
	var fresh []neighbour
	keep := func(n neighbour) {
		if !w.keys[n.key] {
			w.keys[n.key] = true
			fresh = append(fresh, n)
		}
	}
	if d.complete {
		for _, f := range d.Facts {
			if !f.TS.Before(from) && !f.TS.After(to) {
				if n, ok := neighbourOf(f, w.node); ok {
					keep(n)
				}
			}
		}
	} else if lo, hi := maxTime(from, d.Window.From), minTime(to, d.Window.To); !hi.Before(lo) {
		// Whole seconds, as request_facts.ts. The saved row has what a
		// neighbour is (tenant, model, time, decode rank); of its lines,
		// the node's decode Receive line is the one the node logged as
		// such within the link margin. Linking each request again from its
		// lines read the gateway, engine and transfer tables for every
		// batch: at scale 50, 458 statements of 178M gateway rows in all.
		refs, err := d.DB.DecodeFactRefs(ctx, d.readVersion(), lo, hi, w.node)
		if err != nil {
			return err
		}
		m := d.Cfg.LinkMargin
		recv, err := d.DB.DecodeReceiveLines(ctx, lo.Add(-m), hi.Add(m), w.node)
		if err != nil {
			return err
		}
		for _, r := range refs {
			switch f := d.request(r.Key); {
			case w.keys[r.Key]:
			case f != nil:
				if n, ok := neighbourOfRequest(f, w.node); ok {
					keep(n)
				}
			case d.Window.Contains(r.TS) && r.Tenant != "" && r.DecodeNode == w.node:
				keep(neighbourOfRef(r, recv))
			}
		}
	}
	slices.SortFunc(fresh, func(a, b neighbour) int {
		return cmp.Or(a.ts.Compare(b.ts), cmp.Compare(a.key, b.key))
	})
	w.held = append(w.held, fresh...)
	return nil
}

// neighbourOfRef is neighbourOf for a saved row: recv (sorted) lists the
// node's decode Receive lines around it, and at most one of the row's
// lines is among them (a linked request keeps one Receive line a side).
func neighbourOfRef(r domain.FactRef, recv []uint64) neighbour {
	n := neighbour{key: r.Key, tenant: r.Tenant, model: r.Model, ts: r.TS, rank: r.DecodeDPRank}
	for _, l := range r.Lines {
		if _, ok := slices.BinarySearch(recv, l); ok {
			n.recv = l
			break
		}
	}
	return n
}

// readAhead is how far past a victim the fallback reads a node's requests
// when more of its victims are there. Each read scans request_facts (its
// key is not time): at scale 50, victims read 4 hours ahead took 32 reads
// (61.6 s of the server's time), where one read per victim took 200.
// Twelve hours of a node's requests at scale 100 are about 95,000 small
// records.
const readAhead = 12 * time.Hour

// addWindowSources is the fallback when no replay is possible: tenants
// served on the victim's decode node (and DP rank, when known) in the
// windowBefore before it are possible writers. Victims are taken node by
// node, oldest first, so each node's requests are read back once; each
// victim is handed to fold as soon as its sources are complete.
func addWindowSources(ctx context.Context, d *Dataset, fallback []*victim, fold func(*victim)) error {
	byNode := map[string][]*victim{}
	var nodes []string
	for _, v := range fallback {
		node := decodeNodeOf(v)
		if node == "" {
			fold(v)
			continue
		}
		if byNode[node] == nil {
			nodes = append(nodes, node)
		}
		byNode[node] = append(byNode[node], v)
	}
	slices.Sort(nodes)
	for _, node := range nodes {
		vs := byNode[node]
		slices.SortFunc(vs, func(a, b *victim) int { return cmp.Or(a.ts.Compare(b.ts), cmp.Compare(a.key, b.key)) })
		w := &neighbourWindow{d: d, node: node, keys: map[string]bool{}}
		last := 0 // the last victim within readAhead of the current one
		for i, v := range vs {
			// Read ahead to that victim: what a read holds stays within
			// windowBefore + readAhead of the node's requests.
			last = max(last, i)
			for last+1 < len(vs) && vs[last+1].ts.Sub(v.ts) <= readAhead {
				last++
			}
			near, err := w.upTo(ctx, v.ts, vs[last].ts)
			if err != nil {
				return err
			}
			addNeighbours(v, node, near)
			fold(v)
		}
	}
	return nil
}

// addNeighbours adds the requests of near on the victim's DP rank (when
// both are known) in the windowBefore before it as possible writers.
func addNeighbours(v *victim, node string, near []neighbour) {
	rank := int16(-1)
	if v.req != nil && v.req.HasDecode {
		rank = v.req.DecodeDPRank
	}
	for _, n := range near {
		if n.key == v.key {
			continue
		}
		if rank >= 0 && n.rank >= 0 && n.rank != rank {
			continue
		}
		if n.ts.After(v.ts) || n.ts.Before(v.ts.Add(-windowBefore)) {
			continue
		}
		s := v.sources[n.key]
		if s == nil {
			s = &source{key: n.key, tenant: n.tenant, model: n.model, ts: n.ts, node: node}
			v.sources[n.key] = s
		}
		s.conf = max(s.conf, v.conf*0.2)
		s.findings = append(s.findings, v.findings...)
		s.better(domain.Possible, 0, 0, []uint64{n.recv}) // 0 (no Receive line) is dropped with the list's zeros
	}
}
