package analyze

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// reconstructGroup is how many victim findings the reconstruction folds
// at a time, at least: a group is closed at the first victim past it
// that shares no room with the group (a variable: tests make it small).
// Each group's findings are read back whole, with their victims'
// sources: at incident-2026 scale 100 (74,235 victim findings) about 10
// groups, each holding a few MiB, where the reconstruction held all of
// them and every victim's sources at once.
var reconstructGroup = 8192

// victimSet is the victim findings a reconstruction folds, on local disk
// until their group is folded: this run's (held) and the current ones
// earlier runs stored that no held one replaces. In the heap stay the
// victims' rooms and, per finding, its victim (4 bytes); per victim, its
// group.
type victimSet struct {
	held    *heldFindings
	earlier findingSpill
	rooms   victimRooms
	// victimOf[0] and [1] are, per held and per earlier finding in the
	// order added, its victim's index in rooms (-1: it marks none).
	victimOf [2][]int32
	groupOf  []int32 // per victim: its group
	groups   int
}

// victimSet reads the stored victim findings no held one replaces into
// the set's spill, notes every victim, and returns the requests the
// findings name (the victims and the sources the findings give), which
// the Dataset must know before any group is folded.
func (r *Runner) victimSet(ctx context.Context, held *heldFindings) (vs *victimSet, named []string, err error) {
	vs = &victimSet{held: held}
	vs.earlier.spill.name = "stored victim findings"
	note := func(f *Finding, src int) {
		vs.victimOf[src] = append(vs.victimOf[src], vs.rooms.add(f))
		named = append(named, f.RequestKey)
		named = append(named, f.ForeignRequestKeys...)
	}
	heldIDs := make(map[string]bool, held.len())
	if err := held.each(streamBatch, func(fs []Finding) error {
		for i := range fs {
			heldIDs[fs[i].ID] = true
			note(&fs[i], 0)
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	// Only the victim findings: the reconstruction reads nothing else,
	// and the others are most of the findings (at scale 100, 487,000
	// abort_reuse leads of 561,000, which the server sorted in 1.3 GB to
	// send them all when the filter ran here alone). A held finding
	// replaces its stored copy: the newest copy is current.
	var spillErr error
	if _, err := r.DB.LatestFindingsWhere(ctx, victimFloor(), func(f *Finding) bool {
		if spillErr != nil || !marksVictim(f.Analyzer, f) || heldIDs[f.ID] {
			return false
		}
		if spillErr = vs.earlier.put(f); spillErr == nil {
			note(f, 1)
		}
		return false
	}); err != nil {
		vs.close()
		return nil, nil, err
	}
	if spillErr != nil {
		vs.close()
		return nil, nil, spillErr
	}
	return vs, named, nil
}

// group parts the victims into groups of at least size findings, in the
// order of their decode node and time, so that the no-replay fallback
// reads each node's requests about once over all groups. A room's
// victims share its lineage (sortVictims' byRoom, the fold's
// knownLineage), so they are one unit, placed by its first victim.
func (vs *victimSet) group(d *Dataset, size int) {
	rv := &vs.rooms
	n := len(rv.keys)
	type unit struct {
		node     string
		ts       int64
		key      string
		victims  []int32
		findings int
	}
	var units []*unit
	byRoom := map[uint64]*unit{}
	for i := range n {
		node := ""
		if f := d.request(rv.keys[i]); f != nil && f.HasDecode {
			node = f.DecodeNode
		}
		u := byRoom[rv.rooms[i]]
		if u == nil {
			u = &unit{node: node, ts: rv.first[i].ts, key: rv.keys[i]}
			units = append(units, u)
			if rv.rooms[i] != 0 {
				byRoom[rv.rooms[i]] = u
			}
		} else if c := cmp.Or(cmp.Compare(node, u.node), cmp.Compare(rv.first[i].ts, u.ts), cmp.Compare(rv.keys[i], u.key)); c < 0 {
			u.node, u.ts, u.key = node, rv.first[i].ts, rv.keys[i]
		}
		u.victims = append(u.victims, int32(i))
		u.findings += int(rv.findings[i])
	}
	slices.SortFunc(units, func(a, b *unit) int {
		return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key))
	})
	vs.groupOf = make([]int32, n)
	g, in := int32(0), 0
	for _, u := range units {
		if in >= size {
			g++
			in = 0
		}
		for _, v := range u.victims {
			vs.groupOf[v] = g
		}
		in += u.findings
	}
	vs.groups = int(g) + 1
}

// groupFinding is a finding of a group, and whether it is held (this
// run's, stored once folded) or an earlier run's.
type groupFinding struct {
	f    Finding
	held bool
}

// read is group g's findings whole, in domain.SortFindings' order, as
// the reconstruction reads them. Each group reads both spills through,
// decoding only its own findings: at scale 100, 10 passes over 63 MB of
// local disk the page cache holds, where a seek per finding would need
// an offset of each kept in the heap. A held finding that marks no victim
// comes with the first group, to be stored with the others.
func (vs *victimSet) read(g int) (fs []Finding, held []bool, err error) {
	var out []groupFinding
	for src, spill := range []*findingSpill{&vs.held.findings, &vs.earlier} {
		of := vs.victimOf[src]
		if len(of) != spill.spill.n {
			return nil, nil, fmt.Errorf("victim findings: %d noted, %d spilled", len(of), spill.spill.n)
		}
		in := func(i int) bool {
			if v := of[i]; v >= 0 {
				return int(vs.groupOf[v]) == g
			}
			return g == 0 && src == 0
		}
		if err := spill.pick(in, func(f Finding) error {
			out = append(out, groupFinding{f, src == 0})
			return nil
		}); err != nil {
			return nil, nil, err
		}
	}
	slices.SortFunc(out, func(a, b groupFinding) int { return orderOf(&a.f).compare(orderOf(&b.f)) })
	fs, held = make([]Finding, len(out)), make([]bool, len(out))
	for i := range out {
		fs[i], held[i] = out[i].f, out[i].held
	}
	return fs, held, nil
}

func (vs *victimSet) close() {
	vs.earlier.close()
}
