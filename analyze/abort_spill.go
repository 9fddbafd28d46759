package analyze

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// abortSpill holds abort_reuse's cases from the slices that find them to
// the conclusion that judges them, encoded on local disk. They grow with
// the aborts in the window (185 MiB of a 783 MiB heap at scale 100,
// session 38: docs/cluster.md, "What the analysis holds at scale 100"),
// are written once and read in order, so a file costs the analysis
// nothing it needs in memory. The file is unlinked as soon as it is
// made: a crash leaves nothing behind, and closing it frees the disk.
// Where no temporary file can be made (a read-only TMPDIR) the encoded
// cases stay in memory: 234 bytes a candidate in BenchmarkAbortCase,
// against 318 decoded.
type abortSpill struct {
	f    *os.File // nil: the cases are in mem
	mem  bytes.Buffer
	w    *bufio.Writer
	size int64 // bytes written
	n    int   // cases written
	enc  []byte
}

// add appends c.
func (s *abortSpill) add(c *abortCase) error {
	if s.w == nil {
		s.open()
	}
	s.enc = encodeAbortCase(s.enc[:0], c)
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(len(s.enc)))
	if _, err := s.w.Write(hdr[:h]); err != nil {
		return fmt.Errorf("abort_reuse: spill a case: %w", err)
	}
	if _, err := s.w.Write(s.enc); err != nil {
		return fmt.Errorf("abort_reuse: spill a case: %w", err)
	}
	s.size += int64(h + len(s.enc))
	s.n++
	return nil
}

func (s *abortSpill) open() {
	s.w = bufio.NewWriterSize(&s.mem, 64<<10)
	f, err := os.CreateTemp("", "kvtrail-abort-cases-")
	if err != nil {
		return // in memory
	}
	_ = os.Remove(f.Name())
	s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
}

// each decodes the cases in the order they were added; more may be added
// after it.
func (s *abortSpill) each(fn func(abortCase) error) error {
	if s.n == 0 {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("abort_reuse: spill the cases: %w", err)
	}
	var r io.Reader = bytes.NewReader(s.mem.Bytes())
	if s.f != nil {
		r = io.NewSectionReader(s.f, 0, s.size)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for range s.n {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("abort_reuse: read back the spilled cases: %w", err)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("abort_reuse: read back the spilled cases: %w", err)
		}
		c, err := decodeAbortCase(buf)
		if err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// close drops the cases and frees the file.
func (s *abortSpill) close() {
	if s.f != nil {
		_ = s.f.Close()
	}
	*s = abortSpill{}
}

// encodeAbortCase appends c to b: varints and length-prefixed strings, in
// the order decodeAbortCase reads them.
func encodeAbortCase(b []byte, c *abortCase) []byte {
	e := caseEnc{b}
	t := c.t
	e.i64(unixNano(t.TS))
	e.str(t.Node)
	e.str(t.Role)
	e.i64(int64(t.DPRank))
	e.str(t.Source)
	e.str(t.Event)
	e.str(t.RID)
	e.u64(t.Room)
	e.u64(t.OtherRoom)
	e.i64(t.MetaIndex)
	e.str(t.Reason)
	e.str(t.Peer)
	e.str(t.NIC)
	e.u64(t.Line)
	e.u64(uint64(t.Msg))
	e.str(c.src.key)
	e.str(c.src.gwID)
	e.str(c.src.tenant)
	e.u64s(c.src.lines)
	e.i64(int64(c.rank))
	e.u64(uint64(len(c.cands)))
	for i := range c.cands {
		v := &c.cands[i]
		e.u64(v.room)
		e.i64(v.at)
		e.i64(v.end)
		e.i64(v.ts)
		e.i64(v.first)
		e.i64(v.last)
		e.i64(int64(v.rank))
		if v.success {
			e.u64(1)
		} else {
			e.u64(0)
		}
		e.str(v.key)
		e.str(v.gwID)
		e.str(v.tenant)
		e.str(v.prefill)
		e.str(v.decode)
		e.str(v.links)
		e.u64(uint64(len(v.rids)))
		for _, r := range v.rids {
			e.str(r)
		}
		e.u64s(v.lines)
	}
	return e.b
}

// decodeAbortCase reads what encodeAbortCase wrote. Empty lists come back
// nil.
func decodeAbortCase(b []byte) (abortCase, error) {
	d := caseDec{b: b}
	t := &TransferEvent{}
	t.TS = fromUnixNano(d.i64())
	t.Node = d.str()
	t.Role = d.str()
	t.DPRank = int16(d.i64())
	t.Source = d.str()
	t.Event = d.str()
	t.RID = d.str()
	t.Room = d.u64()
	t.OtherRoom = d.u64()
	t.MetaIndex = d.i64()
	t.Reason = d.str()
	t.Peer = d.str()
	t.NIC = d.str()
	t.Line = d.u64()
	t.Msg = uint8(d.u64())
	c := abortCase{t: t}
	c.src.key = d.str()
	c.src.gwID = d.str()
	c.src.tenant = d.str()
	c.src.lines = d.u64s()
	c.rank = int16(d.i64())
	if n := d.count(); n > 0 {
		c.cands = make([]abortCand, n)
		for i := range c.cands {
			v := &c.cands[i]
			v.room = d.u64()
			v.at = d.i64()
			v.end = d.i64()
			v.ts = d.i64()
			v.first = d.i64()
			v.last = d.i64()
			v.rank = int16(d.i64())
			v.success = d.u64() == 1
			v.key = d.str()
			v.gwID = d.str()
			v.tenant = d.str()
			v.prefill = d.str()
			v.decode = d.str()
			v.links = d.str()
			if n := d.count(); n > 0 {
				v.rids = make([]string, n)
				for j := range v.rids {
					v.rids[j] = d.str()
				}
			}
			v.lines = d.u64s()
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("bytes left over")
	}
	if d.err != nil {
		return abortCase{}, fmt.Errorf("abort_reuse: a spilled case does not decode: %w", d.err)
	}
	return c, nil
}

type caseEnc struct{ b []byte }

func (e *caseEnc) u64(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *caseEnc) i64(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *caseEnc) str(s string) { e.u64(uint64(len(s))); e.b = append(e.b, s...) }
func (e *caseEnc) u64s(vs []uint64) {
	e.u64(uint64(len(vs)))
	for _, v := range vs {
		e.u64(v)
	}
}

// caseDec reads a case; its first error sticks and later reads give zeros.
type caseDec struct {
	b   []byte
	err error
}

func (d *caseDec) u64() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *caseDec) i64() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list's length, which no more than the bytes left can back
// (each element takes at least one).
func (d *caseDec) count() int {
	n := d.u64()
	if n > uint64(len(d.b)) {
		if d.err == nil {
			d.err = errors.New("list longer than the case")
		}
		return 0
	}
	return int(n)
}

func (d *caseDec) str() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *caseDec) u64s() []uint64 {
	n := d.count()
	if n == 0 {
		return nil
	}
	vs := make([]uint64, n)
	for i := range vs {
		vs[i] = d.u64()
	}
	return vs
}
