package spool

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
)

// Drain delivers records to deliver, oldest first, until the spool is
// empty, deliver fails or ctx is done, and returns how many records were
// delivered. A record whose delivery fails stays at the head for the next
// Drain. A segment is deleted once all its records were delivered. The
// batch passed to deliver is freshly allocated and may be retained.
//
// Records appended while Drain runs are delivered by the same call.
func (s *Spool) Drain(ctx context.Context, deliver func(batch []byte) error) (n int, err error) {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return n, ErrClosed
		}
		if len(s.segs) == 0 {
			s.mu.Unlock()
			return n, nil
		}
		head := s.segs[0]
		end := head.size
		s.mu.Unlock()

		if s.drainOff < end {
			k, err := s.deliverSegment(ctx, head.seq, end, deliver)
			n += k
			if err != nil {
				return n, err
			}
			continue // more may have been appended meanwhile
		}
		if err := s.removeHead(head); err != nil {
			return n, err
		}
	}
}

// deliverSegment delivers the records of segment seq from drainOff to end.
func (s *Spool) deliverSegment(ctx context.Context, seq uint64, end int64, deliver func([]byte) error) (int, error) {
	name := segName(seq)
	f, err := os.Open(s.path(seq))
	if err != nil {
		return 0, fmt.Errorf("spool: drain: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.NewSectionReader(f, s.drainOff, end-s.drainOff), 1<<20)
	n := 0
	for s.drainOff < end {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		batch, err := readRecord(r, end-s.drainOff)
		if err != nil {
			// Open validated this data and it was written by this process:
			// the disk changed under us. Stop rather than skip evidence.
			return n, fmt.Errorf("spool: drain: segment %s offset %d: %w", name, s.drainOff, err)
		}
		if err := deliver(batch); err != nil {
			return n, fmt.Errorf("spool: drain: deliver record at %s offset %d: %w", name, s.drainOff, err)
		}
		s.drainOff += headerSize + int64(len(batch))
		n++
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
	}
	return n, nil
}

// removeHead deletes the fully delivered head segment, unless records were
// appended to it in the meantime.
func (s *Spool) removeHead(head *segment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	isActive := func() bool { return s.f != nil && s.active() == head }
	for isActive() && s.syncing {
		s.cond.Wait()
	}
	if s.closed {
		return ErrClosed
	}
	if head.size > s.drainOff {
		return nil // grew; Drain goes round again
	}
	if isActive() {
		if err := s.closeActive(); err != nil {
			return err
		}
	}
	if err := os.Remove(s.path(head.seq)); err != nil {
		return fmt.Errorf("spool: remove drained segment: %w", err)
	}
	s.segs = s.segs[1:]
	s.size -= head.size
	s.drainOff = 0
	// A removal lost in a crash only means the segment is delivered again,
	// which at-least-once allows; the sync just keeps that window small.
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("spool: sync directory: %w", err)
	}
	return nil
}
