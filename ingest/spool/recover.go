package spool

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// recover loads the segment list, validating every record and truncating
// each segment at its first invalid one. Called by Open only.
func (s *Spool) recover() error {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var seqs []uint64
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".seg")
		if !ok || !de.Type().IsRegular() {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil || segName(seq) != de.Name() {
			continue // not ours
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	changed := false
	for _, seq := range seqs {
		seg, cut, err := s.recoverSegment(seq)
		if err != nil {
			return err
		}
		if cut != nil {
			s.cuts = append(s.cuts, *cut)
			changed = true
		}
		s.nextSeq = seq + 1
		if seg.size == 0 {
			// Nothing to deliver: a segment created just before a crash,
			// or one whose first record was torn.
			if err := os.Remove(s.path(seq)); err != nil {
				return fmt.Errorf("remove empty segment: %w", err)
			}
			changed = true
			continue
		}
		s.segs = append(s.segs, seg)
		s.size += seg.size
		s.pending += seg.records
	}
	if changed {
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("sync directory: %w", err)
		}
	}
	return nil
}

// recoverSegment scans one segment and truncates it after the last valid
// record, returning what was cut, if anything.
func (s *Spool) recoverSegment(seq uint64) (*segment, *Cut, error) {
	name := segName(seq)
	f, err := os.OpenFile(s.path(seq), os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat segment %s: %w", name, err)
	}
	seg := &segment{seq: seq}
	total := fi.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	var invalid error
	for invalid == nil {
		payload, err := readRecord(r, total-seg.size)
		switch {
		case err == io.EOF:
			return seg, nil, nil
		case isFrameError(err):
			invalid = err
		case err != nil:
			return nil, nil, fmt.Errorf("segment %s offset %d: %w", name, seg.size, err)
		default:
			seg.size += headerSize + int64(len(payload))
			seg.records++
		}
	}
	// The bytes from seg.size on are not a record: cut them.
	cut := &Cut{Segment: name, Offset: seg.size, Bytes: total - seg.size, Reason: invalid.Error()}
	if err := f.Truncate(seg.size); err != nil {
		return nil, nil, fmt.Errorf("truncate segment %s at %d: %w", name, seg.size, err)
	}
	if err := f.Sync(); err != nil {
		return nil, nil, fmt.Errorf("sync segment %s: %w", name, err)
	}
	return seg, cut, nil
}
