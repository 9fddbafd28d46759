package spool

import (
	"fmt"
	"os"
)

// Append writes batch as one record and returns once it is fsync'd. It
// returns an error wrapping ErrFull, without writing, if the spool would
// exceed its byte limit.
func (s *Spool) Append(batch []byte) error {
	if len(batch) > MaxRecordBytes {
		return fmt.Errorf("spool: append: record of %d bytes exceeds the %d-byte record limit", len(batch), MaxRecordBytes)
	}
	// The header is computed outside the lock (the checksum reads the
	// whole batch); the batch itself is written as is, not copied into a
	// frame, so a large push does not cost its size twice in memory.
	hdr := header(batch)
	n := int64(headerSize + len(batch))

	s.mu.Lock()
	defer s.mu.Unlock()
	var rotate bool
	for {
		if err := s.usable(); err != nil {
			return err
		}
		rotate = s.f != nil && s.active().size > 0 && s.active().size+n > s.segBytes
		if !rotate || !s.syncing {
			break
		}
		s.cond.Wait() // the segment being fsync'd cannot be closed yet
	}
	if s.size+n > s.maxBytes {
		return fmt.Errorf("%w: appending %d bytes would exceed the limit of %d bytes (current size %d bytes)", ErrFull, n, s.maxBytes, s.size)
	}
	if rotate {
		if err := s.closeActive(); err != nil {
			return err
		}
	}
	if s.f == nil {
		if err := s.createSegment(); err != nil {
			return err
		}
	}
	seg := s.active()
	_, err := s.f.WriteAt(hdr[:], seg.size)
	if err == nil {
		_, err = s.f.WriteAt(batch, seg.size+headerSize)
	}
	if err != nil {
		// Remove any partial frame so the next record does not land after
		// garbage; if even that fails, the segment cannot be trusted.
		if terr := s.f.Truncate(seg.size); terr != nil {
			s.err = fmt.Errorf("spool: segment %s is damaged after a failed write: %w", segName(seg.seq), terr)
		}
		return fmt.Errorf("spool: append to %s: %w", segName(seg.seq), err)
	}
	seg.size += n
	seg.records++
	s.size += n
	s.pending++
	s.written++
	return s.waitSynced(s.written)
}

// active returns the segment being written. mu held, f != nil.
func (s *Spool) active() *segment { return s.segs[len(s.segs)-1] }

// waitSynced blocks until record number ticket is durable. One caller at a
// time runs fsync without holding mu; records written meanwhile are
// covered by the next fsync, which one of their writers runs. So N
// concurrent Appends cost about two fsyncs, not N. mu held.
func (s *Spool) waitSynced(ticket uint64) error {
	for s.synced < ticket {
		if s.err != nil {
			return s.err
		}
		if s.syncing {
			s.cond.Wait()
			continue
		}
		if s.f == nil { // unreachable: closing a segment syncs it first
			return fmt.Errorf("spool: internal error: no active segment to sync")
		}
		f, target := s.f, s.written
		s.syncing = true
		s.mu.Unlock()
		err := f.Sync()
		s.mu.Lock()
		s.syncing = false
		if err != nil {
			// After a failed fsync the kernel may have dropped the dirty
			// pages, so retrying could report success for lost data.
			s.err = fmt.Errorf("spool: fsync failed, refusing further writes: %w", err)
		} else if target > s.synced {
			s.synced = target
		}
		s.cond.Broadcast()
	}
	return nil
}

// createSegment opens a new, empty active segment. mu held.
func (s *Spool) createSegment() error {
	seq := s.nextSeq
	f, err := os.OpenFile(s.path(seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spool: create segment: %w", err)
	}
	// The directory entry must be durable too, or a crash could lose the
	// whole file even though its records were fsync'd.
	if err := syncDir(s.dir); err != nil {
		f.Close()
		os.Remove(s.path(seq))
		return fmt.Errorf("spool: sync directory: %w", err)
	}
	s.nextSeq++
	s.f = f
	s.segs = append(s.segs, &segment{seq: seq})
	return nil
}
