package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// streams keeps one INSERT open per table for the length of a commit
// window and sends rows to it in blocks as they arrive. ClickHouse squashes
// the blocks of one INSERT into large parts, so a window of many chunks
// costs the server one part per table and partition, where an INSERT per
// chunk would cost one each: measured on 18.16, the same raw_lines rows in
// 35 INSERTs took 6x the server CPU of one INSERT, most of it creating part
// files. Rows sent are not durable until commit returns; the caller saves
// checkpoints only after that.
type streams struct {
	store Store
	// max is how many INSERTs may be open at once: each holds a pooled
	// connection until commit, and reads (checkpoints) need one too.
	max   int
	open  map[string]*openInsert // by tableWrite.key
	order []*openInsert          // the same, in the order they were opened
	// series are the metric series written so far (metric_series rows
	// go out once per series, not per window).
	series seriesSeen
	// sources are the line sources written so far (line_sources rows
	// go out once per source, not per window).
	sources sourcesSeen
	// lanes give up to maxLanes large sources of the window an INSERT of
	// their own in the key-ordered tables (keyOrdered); the other sources
	// share one. A source's sorted chunks follow each other in table
	// order, so the blocks the server squashes from its own INSERT are
	// sorted already and written without the sort; two sources in one
	// INSERT interleave, and the server sorts. Measured on 18.16 with
	// 610k raw_lines rows: 0.78 of the server CPU and page faults sorted.
	lanes    map[string]string
	maxLanes int
	// large are the sources that have sent a full chunk: only they get a
	// lane, so a run of small files does not cost a part per file.
	large map[string]bool
}

type openInsert struct {
	name string
	x    TableWriter
}

func newStreams(s Store, max, lanes int) *streams {
	return &streams{store: s, max: max, open: map[string]*openInsert{}, lanes: map[string]string{}, maxLanes: lanes, large: map[string]bool{}}
}

// lane returns the INSERT lane of source's rows in the key-ordered
// tables: its own if it has one, or if it is a large source (this chunk
// or an earlier one full) and a lane is free; else the shared lane.
func (s *streams) lane(source string, b *Batch) string {
	if l, ok := s.lanes[source]; ok {
		return l
	}
	if b.full() {
		s.large[source] = true
	}
	if !s.large[source] || len(s.lanes) >= s.maxLanes {
		return ""
	}
	l := "#" + strconv.Itoa(len(s.lanes)+1)
	s.lanes[source] = l
	return l
}

// errWindowFull is returned by add when a table needs an INSERT but max
// are already open; the caller commits the window and adds again.
var errWindowFull = errors.New("every INSERT slot is in use")

// add sends b's rows into the open INSERTs, table by table, opening one
// per table as needed. On errWindowFull, tables before the full one have
// their rows in the window; the caller commits and calls add again with
// from set to the returned index, so no table is sent twice.
func (s *streams) add(ctx context.Context, b *Batch, source string, from int) (int, error) {
	src, raw, typed := tableWrites(b, time.Now().UTC(), &s.series, &s.sources)
	all := append([]tableWrite{src, raw}, typed...)
	lane := s.lane(source, b)
	for i := from; i < len(all); i++ {
		if all[i].n == 0 {
			continue
		}
		key := all[i].key()
		if keyOrdered[all[i].name] {
			key += lane
		}
		oi, err := s.get(ctx, all[i], key)
		if err != nil {
			return i, err
		}
		if err := send(oi, all[i]); err != nil {
			return i, err
		}
	}
	return len(all), nil
}

// get returns t's open INSERT under key, opening it if there is a free slot.
func (s *streams) get(ctx context.Context, t tableWrite, key string) (*openInsert, error) {
	if oi := s.open[key]; oi != nil {
		return oi, nil
	}
	if len(s.open) >= s.max {
		return nil, errWindowFull
	}
	x, err := s.store.OpenInsert(ctx, t.name, t.cols)
	if err != nil {
		return nil, fmt.Errorf("prepare insert into %s: %w", t.name, err)
	}
	oi := &openInsert{name: t.name, x: x}
	s.open[key] = oi
	s.order = append(s.order, oi)
	return oi, nil
}

// send appends t's rows to oi, sending a block whenever it holds
// blockRows rows.
func send(oi *openInsert, t tableWrite) error {
	for lo := 0; lo < t.n; lo += blockRows {
		hi := min(lo+blockRows, t.n)
		if err := t.fill(oi.x, lo, hi); err != nil {
			return fmt.Errorf("append to %s: %w", t.name, err)
		}
		if oi.x.Rows() >= blockRows {
			if err := oi.x.Flush(); err != nil {
				return fmt.Errorf("send rows to %s: %w", t.name, err)
			}
		}
	}
	return nil
}

// commit ends every open INSERT, all at once: each one's end is the
// server writing its parts, and the tables' parts are written in
// parallel. When it returns nil every row added since the last commit is
// stored; after an error some tables may be stored and others not, which a
// rerun from the checkpoints repairs.
func (s *streams) commit() (err error) {
	defer s.reset()
	defer func() {
		if err == nil {
			s.series.committed()
			s.sources.committed()
		} else {
			s.series.dropped()
			s.sources.dropped()
		}
	}()
	errs := make([]error, len(s.order))
	var wg sync.WaitGroup
	for i, oi := range s.order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := oi.x.Send(); err != nil {
				errs[i] = fmt.Errorf("insert into %s: %w", oi.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// abort drops every open INSERT without committing it.
func (s *streams) abort() {
	for _, oi := range s.order {
		_ = oi.x.Abort()
	}
	s.series.dropped()
	s.sources.dropped()
	s.reset()
}

func (s *streams) reset() {
	clear(s.open)
	clear(s.lanes)
	s.order = s.order[:0]
}

// empty reports whether no INSERT is open.
func (s *streams) empty() bool { return len(s.order) == 0 }
