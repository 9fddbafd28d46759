package analyze

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvtrail/kvtrail/internal/varbin"
)

// abortSpill holds abort_reuse's cases from the slices that find them to
// the conclusion that judges them, encoded on local disk (recordSpill).
// They grow with the aborts in the window (185 of the 764 MiB in use at
// the scale-100 peak, session 38: docs/cluster.md, "What the analysis
// holds at scale 100"), are written once and read in order, so a file
// costs the analysis nothing it needs in memory. In memory, where no
// temporary file can be made, a candidate takes 234 bytes encoded in
// BenchmarkAbortCase, against 318 decoded.
type abortSpill struct {
	recordSpill
	enc []byte
}

// add appends c.
func (s *abortSpill) add(c *abortCase) error {
	s.name = "abort_reuse cases"
	s.enc = encodeAbortCase(s.enc[:0], c)
	return s.recordSpill.add(s.enc)
}

// each decodes the cases in the order they were added; more may be added
// after it.
func (s *abortSpill) each(fn func(abortCase) error) error {
	return s.recordSpill.each(func(b []byte) error {
		c, err := decodeAbortCase(b)
		if err != nil {
			return err
		}
		return fn(c)
	})
}

// close drops the cases and frees the file.
func (s *abortSpill) close() {
	s.recordSpill.close()
	s.enc = nil
}

// encodeAbortCase appends c to b: varints and length-prefixed strings, in
// the order decodeAbortCase reads them.
func encodeAbortCase(b []byte, c *abortCase) []byte {
	u, i, str := binary.AppendUvarint, binary.AppendVarint, varbin.AppendString
	u64s := varbin.AppendUvarints
	t := c.t
	b = i(b, unixNano(t.TS))
	b = str(str(b, t.Node), t.Role)
	b = i(b, int64(t.DPRank))
	b = str(str(str(b, t.Source), t.Event), t.RID)
	b = u(u(b, t.Room), t.OtherRoom)
	b = i(b, t.MetaIndex)
	b = str(str(str(b, t.Reason), t.Peer), t.NIC)
	b = u(u(b, t.Line), uint64(t.Msg))
	b = str(str(str(b, c.src.key), c.src.gwID), c.src.tenant)
	b = u64s(b, c.src.lines)
	b = i(b, int64(c.rank))
	b = u(i(b, c.released), c.releasedLine)
	b = u(b, uint64(len(c.cands)))
	for k := range c.cands {
		v := &c.cands[k]
		b = u(b, v.room)
		b = i(i(i(i(i(b, v.at), v.end), v.ts), v.first), v.last)
		b = i(b, int64(v.rank))
		success := uint64(0)
		if v.success {
			success = 1
		}
		b = u(b, success)
		b = str(str(str(b, v.key), v.gwID), v.tenant)
		b = str(str(str(b, v.prefill), v.decode), v.links)
		b = u(b, uint64(len(v.rids)))
		for _, r := range v.rids {
			b = str(b, r)
		}
		b = u64s(b, v.lines)
	}
	return b
}

var errSpilledCase = errors.New("abort_reuse: a spilled case does not decode")

// decodeAbortCase reads what encodeAbortCase wrote. Empty lists come back
// nil.
func decodeAbortCase(b []byte) (abortCase, error) {
	r := varbin.NewReader(b, errSpilledCase)
	u64s := r.Uvarints
	t := &TransferEvent{}
	t.TS = fromUnixNano(r.Varint())
	t.Node, t.Role = r.Str(), r.Str()
	t.DPRank = int16(r.Varint())
	t.Source, t.Event, t.RID = r.Str(), r.Str(), r.Str()
	t.Room, t.OtherRoom = r.Uvarint(), r.Uvarint()
	t.MetaIndex = r.Varint()
	t.Reason, t.Peer, t.NIC = r.Str(), r.Str(), r.Str()
	t.Line, t.Msg = r.Uvarint(), uint8(r.Uvarint())
	c := abortCase{t: t}
	c.src.key, c.src.gwID, c.src.tenant = r.Str(), r.Str(), r.Str()
	c.src.lines = u64s()
	c.rank = int16(r.Varint())
	c.released, c.releasedLine = r.Varint(), r.Uvarint()
	// A candidate takes at least 16 bytes: 8 numbers, 6 strings and 2
	// lists, a byte each when empty.
	if n := r.Count(16); n > 0 {
		c.cands = make([]abortCand, n)
		for k := range c.cands {
			v := &c.cands[k]
			v.room = r.Uvarint()
			v.at, v.end, v.ts, v.first, v.last = r.Varint(), r.Varint(), r.Varint(), r.Varint(), r.Varint()
			v.rank = int16(r.Varint())
			v.success = r.Uvarint() == 1
			v.key, v.gwID, v.tenant = r.Str(), r.Str(), r.Str()
			v.prefill, v.decode, v.links = r.Str(), r.Str(), r.Str()
			if n := r.Count(1); n > 0 {
				v.rids = make([]string, n)
				for j := range v.rids {
					v.rids[j] = r.Str()
				}
			}
			v.lines = u64s()
		}
	}
	if r.Err == nil && r.Left() > 0 {
		return abortCase{}, fmt.Errorf("%w: %d bytes left over", errSpilledCase, r.Left())
	}
	if r.Err != nil {
		return abortCase{}, r.Err
	}
	return c, nil
}
