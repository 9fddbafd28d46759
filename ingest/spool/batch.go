package spool

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
)

// DrainBatch hands deliver up to maxRecords records from the head of the
// spool (at most maxBytes of payload, but always at least one record), all
// from one segment, oldest first. deliver returns how many of the leading
// records it consumed: those are marked delivered, the rest stay at the
// head for the next call. It returns the number consumed; 0 and no error
// means the spool is empty. Unlike Drain, one call delivers one batch, so
// a consumer can store many pushes with one write.
func (s *Spool) DrainBatch(ctx context.Context, maxRecords int, maxBytes int64, deliver func(batch [][]byte) (int, error)) (int, error) {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	if maxRecords < 1 {
		maxRecords = 1
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		if len(s.segs) == 0 {
			s.mu.Unlock()
			return 0, nil
		}
		head := s.segs[0]
		end := head.size
		s.mu.Unlock()
		if s.drainOff >= end {
			// Removed, or it grew meanwhile: either way go round again.
			if err := s.removeHead(head); err != nil {
				return 0, err
			}
			continue
		}
		recs, sizes, err := s.readBatch(head.seq, end, maxRecords, maxBytes)
		if err != nil {
			return 0, err
		}
		n, err := deliver(recs)
		if n > len(recs) {
			n = len(recs)
		}
		for _, sz := range sizes[:n] {
			s.drainOff += sz
		}
		if n > 0 {
			s.mu.Lock()
			s.pending -= n
			s.mu.Unlock()
		}
		if err != nil {
			return n, fmt.Errorf("spool: drain: %w", err)
		}
		if s.drainOff >= end {
			// Free the segment now if it is complete, so its space is
			// available to Append before the next call.
			if rerr := s.removeHead(head); rerr != nil {
				return n, rerr
			}
		}
		return n, nil
	}
}

// readBatch reads records of segment seq from drainOff, up to end.
func (s *Spool) readBatch(seq uint64, end int64, maxRecords int, maxBytes int64) ([][]byte, []int64, error) {
	name := segName(seq)
	f, err := os.Open(s.path(seq))
	if err != nil {
		return nil, nil, fmt.Errorf("spool: drain: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.NewSectionReader(f, s.drainOff, end-s.drainOff), 1<<20)
	var recs [][]byte
	var sizes []int64
	off, total := s.drainOff, int64(0)
	for off < end && len(recs) < maxRecords && (len(recs) == 0 || total < maxBytes) {
		b, err := readRecord(r, end-off)
		if err != nil {
			// Open validated this data and it was written by this process:
			// the disk changed under us. Stop rather than skip evidence.
			return nil, nil, fmt.Errorf("spool: drain: segment %s offset %d: %w", name, off, err)
		}
		recs = append(recs, b)
		sz := headerSize + int64(len(b))
		sizes = append(sizes, sz)
		off += sz
		total += int64(len(b))
	}
	return recs, sizes, nil
}
