package ingest

import (
	"context"
	"errors"
	"sync"
	"time"
)

// chunk is a run of one source's rows and the checkpoint that holds once
// they are written.
type chunk struct {
	b  *Batch
	cp checkpoint
}

// flusher streams the chunks of all sources being read into one INSERT per
// table and commits them in windows: ClickHouse (18.16 has no async
// inserts) wants few big inserts, and per-chunk inserts of many small
// files would be dominated by per-insert costs. A window ends after
// WindowRecords records, WindowBytes of raw text or WindowInterval; its
// INSERTs are completed, then the checkpoints of the sources it contained
// are saved, so a checkpoint never runs ahead of its rows. Memory holds a
// chunk and one block per table, not the window.
//
// A failed window is not retried here: its rows are no longer in memory.
// The error ends the attempt and Ingest retries from the saved checkpoints,
// the same path a crash takes.
type flusher struct {
	store     Store
	opts      Options
	mu        sync.Mutex
	committed map[string]bool
	// windows counts the windows committed (read after run returns).
	windows int
}

func newFlusher(s Store, opts Options) *flusher {
	return &flusher{store: s, opts: opts, committed: map[string]bool{}}
}

// errWrite marks a ClickHouse write failure: retryable from checkpoints.
type errWrite struct{ err error }

func (e errWrite) Error() string { return e.err.Error() }
func (e errWrite) Unwrap() error { return e.err }

func (f *flusher) run(ctx context.Context, chunks <-chan *chunk, free chan<- *Batch) error {
	st := newStreams(f.store, f.opts.MaxOpenInserts)
	cps := map[string]checkpoint{}
	var records, bytes int
	windowStart := time.Now()
	commit := func() error {
		if len(cps) == 0 && st.empty() {
			return nil
		}
		if err := st.commit(); err != nil {
			return errWrite{err}
		}
		if len(cps) > 0 {
			list := make([]checkpoint, 0, len(cps))
			for _, cp := range cps {
				list = append(list, cp)
			}
			if err := saveCheckpoints(ctx, f.store, list); err != nil {
				return errWrite{err}
			}
			f.mu.Lock()
			for _, cp := range list {
				if cp.Complete {
					f.committed[cp.SourceID] = true
				}
			}
			f.mu.Unlock()
		}
		clear(cps)
		records, bytes, windowStart = 0, 0, time.Now()
		f.windows++
		return nil
	}
	add := func(c *chunk) error {
		for next := 0; ; {
			var err error
			next, err = st.add(ctx, c.b, next)
			if errors.Is(err, errWindowFull) {
				// Every connection the pool lends to inserts is taken:
				// end this window early. Rows of c already sent are
				// committed with it, ahead of c's checkpoint, which is
				// safe (a rerun writes the same keys).
				if err := commit(); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return errWrite{err}
			}
			return nil
		}
	}
	fail := func(err error) error {
		st.abort()
		return err
	}
	tick := time.NewTicker(max(f.opts.WindowInterval/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case c, ok := <-chunks:
			if !ok {
				if err := commit(); err != nil {
					return fail(err)
				}
				return nil
			}
			if err := add(c); err != nil {
				return fail(err)
			}
			cps[c.cp.SourceID] = c.cp
			records += c.b.Len()
			bytes += c.b.bytes
			c.b.reset()
			free <- c.b
			if records >= f.opts.WindowRecords || bytes >= f.opts.WindowBytes {
				if err := commit(); err != nil {
					return fail(err)
				}
			}
		case <-tick.C:
			if len(cps) > 0 && time.Since(windowStart) >= f.opts.WindowInterval {
				if err := commit(); err != nil {
					return fail(err)
				}
			}
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}
