package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// chunk is a run of one source's rows and the checkpoint that holds once
// they are written.
type chunk struct {
	b  *Batch
	cp checkpoint
}

// flusher accumulates chunks from all sources being read and writes them
// in large inserts: ClickHouse (18.16 has no async inserts) wants few big
// batches, and per-source inserts of many small files would be dominated
// by round trips. Each flush writes every table, then the checkpoints of
// the sources it contained, so a checkpoint never runs ahead of its rows.
type flusher struct {
	store     Store
	opts      Options
	mu        sync.Mutex
	committed map[string]bool
}

func newFlusher(s Store, opts Options) *flusher {
	return &flusher{store: s, opts: opts, committed: map[string]bool{}}
}

func (f *flusher) run(ctx context.Context, chunks <-chan *chunk, free chan<- *Batch) error {
	// One write is in flight while the next batch accumulates, so parsing
	// and inserting overlap; the handoff channel bounds it to one.
	type job struct {
		b   *Batch
		cps []checkpoint
	}
	jobs := make(chan job)
	spare := make(chan *Batch, 1)
	spare <- &Batch{}
	werr := make(chan error, 1)
	go func() {
		var err error
		for j := range jobs {
			if err == nil {
				err = f.flush(ctx, j.b, j.cps)
			}
			j.b.reset()
			spare <- j.b
		}
		werr <- err
	}()
	acc := &Batch{}
	cps := map[string]checkpoint{}
	last := time.Now()
	hand := func() error {
		last = time.Now()
		if len(cps) == 0 {
			return nil
		}
		list := make([]checkpoint, 0, len(cps))
		for _, cp := range cps {
			list = append(list, cp)
		}
		select {
		case jobs <- job{b: acc, cps: list}:
		case err := <-werr:
			werr <- err
			return err
		}
		clear(cps)
		select {
		case acc = <-spare:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	finish := func(err error) error {
		close(jobs)
		if werr2 := <-werr; werr2 != nil {
			return werr2
		}
		return err
	}
	tick := time.NewTicker(f.opts.FlushInterval / 2)
	defer tick.Stop()
	for {
		select {
		case c, ok := <-chunks:
			if !ok {
				return finish(hand())
			}
			acc.appendFrom(c.b)
			cps[c.cp.SourceID] = c.cp
			c.b.reset()
			free <- c.b
			if acc.Len() >= f.opts.BatchRecords || acc.bytes >= f.opts.BatchBytes {
				if err := hand(); err != nil {
					return finish(err)
				}
			}
		case <-tick.C:
			if len(cps) > 0 && time.Since(last) >= f.opts.FlushInterval {
				if err := hand(); err != nil {
					return finish(err)
				}
			}
		case <-ctx.Done():
			return finish(ctx.Err())
		}
	}
}

// flush writes the accumulated rows and then their checkpoints, retrying
// transient failures. After a crash between the two, the rerun writes the
// same rows again under the same keys, which the tables fold together.
func (f *flusher) flush(ctx context.Context, b *Batch, cps []checkpoint) error {
	var err error
	for attempt := 0; attempt <= f.opts.Retries; attempt++ {
		if attempt > 0 {
			wait := time.Duration(1<<(attempt-1)) * time.Second
			f.opts.Logger.Warn("retrying batch write", slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.String("error", err.Error()))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		if err = write(ctx, f.store, b); err != nil {
			continue
		}
		if err = saveCheckpoints(ctx, f.store, cps); err != nil {
			continue
		}
		f.mu.Lock()
		for _, cp := range cps {
			if cp.Complete {
				f.committed[cp.SourceID] = true
			}
		}
		f.mu.Unlock()
		return nil
	}
	return fmt.Errorf("write %d records to ClickHouse: %w", b.Len(), err)
}
