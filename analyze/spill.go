package analyze

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
)

// recordSpill holds records (byte strings) written once and read back in
// order, on local disk: what an analysis must keep from one phase to a
// later one without holding it in memory (abort_reuse's cases, the run's
// victim findings). The file is unlinked as soon as it is made: a crash
// leaves nothing behind, and closing it frees the disk. Where no
// temporary file can be made (a read-only TMPDIR) the records stay in
// memory, encoded. Each record carries its length and checksum, so a
// record read back is the record written, or an error.
type recordSpill struct {
	name string   // what the records are, for errors and the file's name
	f    *os.File // nil: the records are in mem
	mem  bytes.Buffer
	w    *bufio.Writer
	size int64 // bytes written
	n    int   // records written
}

var errSpilled = errors.New("a spilled record does not read back")

// add appends rec; s.size before the call is where it starts (readAt).
func (s *recordSpill) add(rec []byte) error {
	if s.w == nil {
		s.open()
	}
	var hdr [binary.MaxVarintLen64 + 4]byte
	h := binary.PutUvarint(hdr[:], uint64(len(rec)))
	binary.LittleEndian.PutUint32(hdr[h:], crc32.Checksum(rec, castagnoli))
	h += 4
	if _, err := s.w.Write(hdr[:h]); err != nil {
		return fmt.Errorf("spill %s: %w", s.name, err)
	}
	if _, err := s.w.Write(rec); err != nil {
		return fmt.Errorf("spill %s: %w", s.name, err)
	}
	s.size += int64(h + len(rec))
	s.n++
	return nil
}

func (s *recordSpill) open() {
	s.w = bufio.NewWriterSize(&s.mem, 64<<10)
	f, err := os.CreateTemp("", "kvtrail-"+strings.ReplaceAll(s.name, " ", "-")+"-")
	if err != nil {
		return // in memory
	}
	_ = os.Remove(f.Name())
	s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
}

// each calls fn with the records in the order they were added; more may
// be added after it. The slice fn gets is reused for the next record.
func (s *recordSpill) each(fn func([]byte) error) error {
	if s.n == 0 {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("spill %s: %w", s.name, err)
	}
	var r io.Reader = bytes.NewReader(s.mem.Bytes())
	if s.f != nil {
		r = io.NewSectionReader(s.f, 0, s.size)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for range s.n {
		n, err := binary.ReadUvarint(br)
		if err == nil && n > uint64(s.size) {
			err = errSpilled // a damaged file: no allocation of its length
		}
		if err != nil {
			return fmt.Errorf("read back the spilled %s: %w", s.name, err)
		}
		if uint64(cap(buf)) < n+4 {
			buf = make([]byte, n+4)
		}
		buf = buf[:n+4]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("read back the spilled %s: %w", s.name, err)
		}
		sum := binary.LittleEndian.Uint32(buf)
		if rec := buf[4:]; crc32.Checksum(rec, castagnoli) != sum {
			return fmt.Errorf("read back the spilled %s: %w: checksum", s.name, errSpilled)
		}
		if err := fn(buf[4:]); err != nil {
			return err
		}
	}
	return nil
}

// readAt reads back the record that starts at off (the spill's size
// when it was added), into buf's storage when it fits.
func (s *recordSpill) readAt(off int64, buf []byte) ([]byte, error) {
	if s.w == nil || off < 0 || off >= s.size {
		return nil, fmt.Errorf("read back the spilled %s: %w: no record at %d", s.name, errSpilled, off)
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("spill %s: %w", s.name, err)
	}
	var r io.ReaderAt = bytes.NewReader(s.mem.Bytes())
	if s.f != nil {
		r = s.f
	}
	var hdr [binary.MaxVarintLen64 + 4]byte
	h, err := r.ReadAt(hdr[:min(int64(len(hdr)), s.size-off)], off)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read back the spilled %s: %w", s.name, err)
	}
	n, k := binary.Uvarint(hdr[:h])
	if k <= 0 || h < k+4 || n > uint64(s.size-off) {
		return nil, fmt.Errorf("read back the spilled %s: %w: a damaged length at %d", s.name, errSpilled, off)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := r.ReadAt(buf, off+int64(k)+4); err != nil {
		return nil, fmt.Errorf("read back the spilled %s: %w", s.name, err)
	}
	if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(hdr[k:]) {
		return nil, fmt.Errorf("read back the spilled %s: %w: checksum", s.name, errSpilled)
	}
	return buf, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// inBatches hands fn what each puts, in batches of at most n (size: how
// many there are, to size the batch). fn must not keep a batch: the next
// one reuses it.
func inBatches[T any](n, size int, each func(put func(T) error) error, fn func([]T) error) error {
	batch := make([]T, 0, max(1, min(n, size)))
	err := each(func(x T) error {
		batch = append(batch, x)
		if len(batch) < n {
			return nil
		}
		err := fn(batch)
		batch = batch[:0]
		return err
	})
	if err == nil && len(batch) > 0 {
		err = fn(batch)
	}
	return err
}

// close drops the records and frees the file.
func (s *recordSpill) close() {
	if s.f != nil {
		_ = s.f.Close()
	}
	*s = recordSpill{}
}
