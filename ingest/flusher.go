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
	// onComplete, if set, is told of each source whose final checkpoint
	// a commit saved.
	onComplete func(ctx context.Context, sourceID string)
	// onSaved, if set, is told of every checkpoint list a commit tried to
	// save, once the save has returned (even with an error: some rows may
	// be stored).
	onSaved func(list []checkpoint)
}

func newFlusher(s Store, opts Options) *flusher {
	return &flusher{store: s, opts: opts, committed: map[string]bool{}}
}

// errWrite marks a ClickHouse write failure: retryable from checkpoints.
type errWrite struct{ err error }

func (e errWrite) Error() string { return e.err.Error() }
func (e errWrite) Unwrap() error { return e.err }

// run streams the chunks into the open INSERTs until chunks is closed,
// committing a window whenever it is full or old, and the last one at the
// end. Each chunk's batch goes back to free once its rows are sent.
func (f *flusher) run(ctx context.Context, chunks <-chan *chunk, free chan<- *Batch) error {
	w := f.newWindow()
	tick := time.NewTicker(max(f.opts.WindowInterval/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		var err error
		select {
		case c, ok := <-chunks:
			if !ok {
				return w.fail(w.commit(ctx))
			}
			err = w.take(ctx, c, free)
		case <-tick.C:
			if w.expired() {
				err = w.commit(ctx)
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			return w.fail(err)
		}
	}
}

// window is the commit window being filled: its open INSERTs, the
// checkpoints of the sources it holds rows of, and its size and age.
type window struct {
	f       *flusher
	st      *streams
	cps     map[string]checkpoint
	records int
	bytes   int
	start   time.Time
}

func (f *flusher) newWindow() *window {
	return &window{f: f, st: newStreams(f.store, f.opts.MaxOpenInserts, f.opts.Workers), cps: map[string]checkpoint{}, start: time.Now()}
}

// take sends c's rows, hands its batch back, and commits when the window
// is full.
func (w *window) take(ctx context.Context, c *chunk, free chan<- *Batch) error {
	if err := w.add(ctx, c); err != nil {
		return err
	}
	w.cps[c.cp.SourceID] = c.cp
	w.records += c.b.Len()
	w.bytes += c.b.bytes
	c.b.reset()
	free <- c.b
	if w.records >= w.f.opts.WindowRecords || w.bytes >= w.f.opts.WindowBytes {
		return w.commit(ctx)
	}
	return nil
}

// add sends c's rows into the window's INSERTs.
func (w *window) add(ctx context.Context, c *chunk) error {
	for next := 0; ; {
		var err error
		next, err = w.st.add(ctx, c.b, c.cp.SourceID, next)
		if errors.Is(err, errWindowFull) {
			// Every connection the pool lends to inserts is taken: end
			// this window early. Rows of c already sent are committed
			// with it, ahead of c's checkpoint, which is safe (a rerun
			// writes the same keys).
			if err := w.commit(ctx); err != nil {
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

// expired reports whether the window holds checkpoints and is older than
// WindowInterval.
func (w *window) expired() bool {
	return len(w.cps) > 0 && time.Since(w.start) >= w.f.opts.WindowInterval
}

// commit completes the window's INSERTs, then saves its checkpoints (never
// the other way round), and starts a new window.
func (w *window) commit(ctx context.Context) error {
	if len(w.cps) == 0 && w.st.empty() {
		return nil
	}
	if err := w.st.commit(); err != nil {
		return errWrite{err}
	}
	if len(w.cps) > 0 {
		list := make([]checkpoint, 0, len(w.cps))
		for _, cp := range w.cps {
			list = append(list, cp)
		}
		err := saveCheckpoints(ctx, w.f.store, list)
		if w.f.onSaved != nil {
			w.f.onSaved(list)
		}
		if err != nil {
			return errWrite{err}
		}
		w.f.markCommitted(list)
		if w.f.onComplete != nil {
			for _, cp := range list {
				if cp.Complete {
					w.f.onComplete(ctx, cp.SourceID)
				}
			}
		}
	}
	clear(w.cps)
	w.records, w.bytes, w.start = 0, 0, time.Now()
	w.f.windows++
	return nil
}

// fail drops the window's open INSERTs unsent and returns err (nil passes).
func (w *window) fail(err error) error {
	if err != nil {
		w.st.abort()
	}
	return err
}

// markCommitted records the sources whose final checkpoint is saved.
func (f *flusher) markCommitted(list []checkpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cp := range list {
		if cp.Complete {
			f.committed[cp.SourceID] = true
		}
	}
}
