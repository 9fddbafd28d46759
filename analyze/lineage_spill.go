package analyze

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/kvtrail/kvtrail/internal/varbin"
)

// lineageSet is the shared replay's answer for victims: each victim
// room's replayed lineage, encoded in a spill as its lane finds it final
// (laneStream.spillFinal; or as its decode node's replay ends, for an
// answer read back from another worker) and decoded when the
// reconstruction asks for it. The answers grow
// with the victims and were held from abort_reuse's replay, which asks
// about the victims known by then, to the end of the reconstruction: at
// incident-2026 scale 100, 83 MiB of the reconstruction's peak and 57 of
// abort_reuse's replay's, still growing there (the writers' page counts
// and lines in a map per victim); 22 MB encoded. Only an index by room
// stays in memory. Safe for concurrent use: the replay's nodes end
// on several goroutines.
type lineageSet struct {
	mu  sync.Mutex
	rs  recordSpill
	enc []byte
	at  map[uint64]lineageAt
	// notes are lanes' notes, which their victims are read with: a lane
	// spills its victims before it knows how many of its requests had no
	// Finish line (laneStream.spillFinal).
	notes []string
}

// lineageAt is where a room's lineage is, which node (and lane of it)
// answered it, and its lane's note (an index in notes, plus one).
type lineageAt struct {
	off  int64
	node int
	lane laneOrder
	note int32
}

// laneOrder is a lane's place in its node's answer: lanes end in boot,
// then rank order, a later lane's answer for a room replacing an
// earlier's.
type laneOrder struct {
	at   int64 // the boot's start, ns
	rank int16
}

func (a lineageAt) after(node int, lane laneOrder) bool {
	if a.node != node {
		return a.node > node
	}
	if a.lane.at != lane.at {
		return a.lane.at > lane.at
	}
	return a.lane.rank > lane.rank
}

func newLineageSet() *lineageSet {
	return &lineageSet{rs: recordSpill{name: "victim lineage"}, at: map[uint64]lineageAt{}}
}

// add spills node's answers (node: its index in the replay's nodes). A
// room two nodes answered keeps the later node's lineage, as the replay's
// merge in node order did.
func (l *lineageSet) add(node int, lineage map[uint64]*VictimReplay) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for room, vr := range lineage {
		if err := l.addLocked(node, laneOrder{}, 0, room, vr); err != nil {
			return err
		}
	}
	return nil
}

// addVictim spills one victim's lineage as node's lane found it, read
// with the lane's note (0: none). A room answered twice keeps the later
// node's, or the later lane's of one node, or (from one lane) the one
// added last.
func (l *lineageSet) addVictim(node int, lane laneOrder, note int32, room uint64, vr *VictimReplay) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addLocked(node, lane, note, room, vr)
}

func (l *lineageSet) addLocked(node int, lane laneOrder, note int32, room uint64, vr *VictimReplay) error {
	if old, ok := l.at[room]; ok && old.after(node, lane) {
		return nil
	}
	off := l.rs.size
	l.enc = encodeVictimReplay(l.enc[:0], room, vr)
	if err := l.rs.add(l.enc); err != nil {
		return err
	}
	l.at[room] = lineageAt{off: off, node: node, lane: lane, note: note}
	return nil
}

// newNote reserves a lane's note, empty until setNote.
func (l *lineageSet) newNote() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, "")
	return int32(len(l.notes))
}

func (l *lineageSet) setNote(at int32, note string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes[at-1] = note
}

// has reports whether room has a lineage.
func (l *lineageSet) has(room uint64) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.at[room]
	return ok
}

// get decodes room's lineage; nil when it has none.
func (l *lineageSet) get(room uint64) (*VictimReplay, error) {
	if l == nil {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.at[room]
	if !ok {
		return nil, nil
	}
	b, err := l.rs.readAt(at.off, l.enc[:0])
	if err != nil {
		return nil, err
	}
	l.enc = b
	got, vr, err := decodeVictimReplay(b)
	if err == nil && got != room {
		err = fmt.Errorf("%w: room %d's lineage reads as room %d's", errSpilled, room, got)
	}
	if err == nil && at.note > 0 && l.notes[at.note-1] != "" {
		// The lane's note comes first, as the lane's end wrote it.
		vr.Uncertain = append([]string{l.notes[at.note-1]}, vr.Uncertain...)
	}
	return vr, err
}

// len is how many rooms have a lineage.
func (l *lineageSet) len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.at)
}

// close drops the answers and frees the file.
func (l *lineageSet) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rs.close()
	l.at, l.enc = nil, nil
}

// lineageView is the lineage of the rooms a caller asked about.
type lineageView struct {
	set  *lineageSet
	want map[uint64]bool
}

func (v lineageView) has(room uint64) bool { return v.want[room] && v.set.has(room) }

func (v lineageView) get(room uint64) (*VictimReplay, error) {
	if !v.want[room] {
		return nil, nil
	}
	return v.set.get(room)
}

// encodeVictimReplay appends room and vr: varints and length-prefixed
// strings, the writers in room order.
func encodeVictimReplay(b []byte, room uint64, vr *VictimReplay) []byte {
	u, str := binary.AppendUvarint, varbin.AppendString
	u64s := varbin.AppendUvarints
	writers := func(b []byte, m map[uint64]*SourcePages) []byte {
		ws := make([]uint64, 0, len(m))
		for w := range m {
			ws = append(ws, w)
		}
		slices.Sort(ws)
		b = u(b, uint64(len(ws)))
		for _, w := range ws {
			s := m[w]
			b = u(u(u(b, w), uint64(s.Prompt)), uint64(s.Output))
			b = u64s(b, s.Lines)
		}
		return b
	}
	b = u(u(b, room), vr.Room)
	b = str(b, vr.Node)
	b = binary.AppendVarint(b, int64(vr.Rank))
	b = str(b, vr.Boot)
	b = u(b, uint64(vr.PageSize))
	b = writers(writers(b, vr.Likely), vr.Possible)
	b = u(b, uint64(len(vr.Uncertain)))
	for _, s := range vr.Uncertain {
		b = str(b, s)
	}
	return u64s(b, vr.Lines)
}

// decodeVictimReplay reads what encodeVictimReplay wrote. Its maps are
// never nil; empty lists come back nil.
func decodeVictimReplay(b []byte) (uint64, *VictimReplay, error) {
	r := varbin.NewReader(b, errSpilled)
	u64s := r.Uvarints
	writers := func() map[uint64]*SourcePages {
		n := r.Count(4) // room, two counts and a list: a byte each at least
		m := make(map[uint64]*SourcePages, n)
		for range n {
			w := r.Uvarint()
			s := &SourcePages{Prompt: int(r.Uvarint()), Output: int(r.Uvarint())}
			s.Lines = u64s()
			m[w] = s
		}
		return m
	}
	room := r.Uvarint()
	vr := &VictimReplay{Room: r.Uvarint(), Node: r.Str(), Rank: int16(r.Varint()), Boot: r.Str(), PageSize: int(r.Uvarint())}
	vr.Likely = writers()
	vr.Possible = writers()
	if n := r.Count(1); n > 0 {
		vr.Uncertain = make([]string, n)
		for i := range vr.Uncertain {
			vr.Uncertain[i] = r.Str()
		}
	}
	vr.Lines = u64s()
	if r.Err == nil && r.Left() > 0 {
		return 0, nil, fmt.Errorf("%w: %d bytes left over in a victim's lineage", errSpilled, r.Left())
	}
	if r.Err != nil {
		return 0, nil, r.Err
	}
	return room, vr, nil
}
