package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// DefaultSegmentBytes is the size at which segments rotate. Smaller
// segments free space sooner during a drain; larger ones mean fewer files.
const DefaultSegmentBytes = 16 << 20

var (
	// ErrFull is returned by Append when the record would take the spool
	// past its byte limit. The caller should answer "unavailable, retry".
	ErrFull = errors.New("spool full")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("spool closed")
)

// Cut describes data removed by recovery in Open.
type Cut struct {
	Segment string // file name within the spool directory
	Offset  int64  // where the kept data ends; the file was truncated here
	Bytes   int64  // bytes removed
	Reason  string // e.g. "partial record", "checksum mismatch"
}

// Option configures Open.
type Option func(*Spool)

// WithSegmentBytes sets the segment rotation size (default
// DefaultSegmentBytes).
func WithSegmentBytes(n int64) Option {
	return func(s *Spool) {
		if n > 0 {
			s.segBytes = n
		}
	}
}

type segment struct {
	seq     uint64
	size    int64 // bytes of complete records
	records int
}

// Spool is a durable FIFO of byte batches in one directory. It is safe for
// concurrent Appends and one Drain at a time (concurrent Drains queue).
type Spool struct {
	dir      string
	maxBytes int64
	segBytes int64
	lock     *os.File
	cuts     []Cut

	drainMu  sync.Mutex // serialises Drain
	drainOff int64      // bytes of segs[0] already delivered; guarded by drainMu

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a group fsync finishes; uses mu
	segs    []*segment // oldest first; when f != nil the last one is active
	f       *os.File   // active segment, nil until the next Append opens one
	nextSeq uint64
	size    int64 // bytes in all segments
	pending int   // records not yet delivered by Drain
	written uint64
	synced  uint64 // group commit: records written / known durable
	syncing bool   // an fsync of f is in progress without mu held
	err     error  // sticky: after a failed fsync nothing is trustworthy
	closed  bool
}

// Open opens or creates the spool in dir, allowing at most maxBytes on
// disk, and recovers from a crash (see the package documentation and
// Recovered). Only one process may have a spool directory open.
func Open(dir string, maxBytes int64, opts ...Option) (*Spool, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("spool: open %s: maxBytes must be positive, got %d", dir, maxBytes)
	}
	s := &Spool{dir: dir, maxBytes: maxBytes, segBytes: DefaultSegmentBytes, nextSeq: 1}
	s.cond = sync.NewCond(&s.mu)
	for _, o := range opts {
		o(s)
	}
	// 0700/0600: batches hold raw log lines, which may include prompts.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: open: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: open %s: %w", dir, err)
	}
	s.lock = lock
	if err := s.recover(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("spool: open %s: %w", dir, err)
	}
	return s, nil
}

// Recovered lists what Open cut from torn or corrupt segments; empty after
// a clean shutdown.
func (s *Spool) Recovered() []Cut { return append([]Cut(nil), s.cuts...) }

// Size returns the bytes the spool occupies on disk (records and framing).
func (s *Spool) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Len returns the number of records not yet delivered by Drain in this
// process. After a restart, records of a partly drained segment count
// again, because they will be delivered again.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// Close syncs and closes the active segment and releases the directory.
// Appends waiting for an fsync complete first.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	for s.syncing {
		s.cond.Wait()
	}
	var err error
	if s.f != nil {
		err = s.closeActive()
	}
	s.closed = true
	s.cond.Broadcast()
	if lerr := s.lock.Close(); err == nil && lerr != nil {
		err = fmt.Errorf("spool: close lock: %w", lerr)
	}
	return err
}

// usable reports why the spool cannot be written, if it cannot. mu held.
func (s *Spool) usable() error {
	if s.closed {
		return ErrClosed
	}
	return s.err
}

// closeActive fsyncs and closes the active segment; the next Append starts
// a new one. mu held and no fsync in flight.
func (s *Spool) closeActive() error {
	name := segName(s.segs[len(s.segs)-1].seq)
	if err := s.f.Sync(); err != nil {
		s.err = fmt.Errorf("spool: fsync %s failed, refusing further writes: %w", name, err)
		s.f.Close()
		s.f = nil
		return s.err
	}
	s.synced = s.written
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("spool: close %s: %w", name, err)
	}
	return nil
}

func segName(seq uint64) string { return fmt.Sprintf("%020d.seg", seq) }

func (s *Spool) path(seq uint64) string { return filepath.Join(s.dir, segName(seq)) }

// syncDir makes file creations and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
