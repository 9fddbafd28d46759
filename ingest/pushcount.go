package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// accounting counts one write's pushed lines per stream for ingest_sources
// so that the counts are of distinct stored lines: a line id seen twice in
// the write, or already in raw_lines (a client's retry, an overlapping
// shipper, a drain replayed after a crash), is counted once. Nothing
// changes in the streams until commit, which runs only after the rows and
// the checkpoints were written.
type accounting struct {
	order  []*pushStream
	deltas map[*pushStream]*streamDelta
}

type streamDelta struct {
	counts      Counts
	first, last time.Time
	seen        map[uint64]bool
	// cands may already be stored: their time is not after the last
	// time counted for the stream, so dropStored asks ClickHouse.
	cands []countCand
	// candIDs are the candidates' ids: written by this attempt, so if it
	// fails they are stored but not counted (see pushStream.uncounted).
	candIDs []uint64
}

type countCand struct {
	id     uint64
	ts     time.Time
	status parse.Status
	bytes  uint64
}

func newAccounting() *accounting { return &accounting{deltas: map[*pushStream]*streamDelta{}} }

// merge adds o's streams, which are not in a (each stream is parsed by
// one worker).
func (a *accounting) merge(o *accounting) {
	for _, st := range o.order {
		a.order = append(a.order, st)
		a.deltas[st] = o.deltas[st]
	}
}

func (a *accounting) add(st *pushStream, id uint64, ts time.Time, status parse.Status, bytes uint64) {
	d := a.deltas[st]
	if d == nil {
		d = &streamDelta{seen: map[uint64]bool{}}
		a.deltas[st] = d
		a.order = append(a.order, st)
	}
	if d.seen[id] {
		return
	}
	d.seen[id] = true
	c := countCand{id: id, ts: ts, status: status, bytes: bytes}
	// LastTS is kept in seconds by ingest_sources: anything up to the end
	// of that second may be a line stored before.
	if !st.cp.LastTS.IsZero() && ts.Before(st.cp.LastTS.Truncate(time.Second).Add(time.Second)) {
		d.cands = append(d.cands, c)
		return
	}
	d.count(c)
}

func (d *streamDelta) count(c countCand) {
	d.counts.Records++
	switch c.status {
	case parse.StatusParsed:
		d.counts.Parsed++
	case parse.StatusMalformed:
		d.counts.Malformed++
	case parse.StatusNoise:
		d.counts.Noise++
	default:
		d.counts.Unknown++
	}
	d.counts.Bytes += c.bytes
	if d.first.IsZero() || c.ts.Before(d.first) {
		d.first = c.ts
	}
	if c.ts.After(d.last) {
		d.last = c.ts
	}
}

// dropStored counts the candidates that are not in raw_lines yet, with one
// query for the whole write over the candidates' time spans.
func (a *accounting) dropStored(ctx context.Context, s Store) error {
	var spans []LineSpan
	for _, st := range a.order {
		d := a.deltas[st]
		if len(d.cands) == 0 {
			continue
		}
		lo, hi := d.cands[0].ts, d.cands[0].ts
		for _, c := range d.cands {
			if c.ts.Before(lo) {
				lo = c.ts
			}
			if c.ts.After(hi) {
				hi = c.ts
			}
		}
		spans = append(spans, LineSpan{Node: st.node, FileDigest: st.id, SourceRef: SourceRef(st.node, st.labels, st.id),
			From: chTime(lo.Truncate(time.Second)), To: chTime(hi)})
	}
	if len(spans) == 0 {
		return nil
	}
	ids, err := s.StoredLineIDs(ctx, spans)
	if err != nil {
		return fmt.Errorf("read stored push line ids: %w", err)
	}
	stored := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		stored[id] = true
	}
	for _, st := range a.order {
		d := a.deltas[st]
		for _, c := range d.cands {
			// Stored by an earlier attempt that failed before its counts
			// were saved: stored, but not counted yet.
			if !stored[c.id] || st.uncounted[c.id] {
				d.count(c)
			}
			d.candIDs = append(d.candIDs, c.id)
		}
		d.cands = nil
	}
	return nil
}

// failed records that this attempt's lines may be stored without being
// counted, so that the retry counts them.
func (a *accounting) failed() {
	for _, st := range a.order {
		d := a.deltas[st]
		if len(d.candIDs) == 0 {
			continue
		}
		if st.uncounted == nil {
			st.uncounted = map[uint64]bool{}
		}
		for _, id := range d.candIDs {
			st.uncounted[id] = true
		}
	}
}

// checkpoints returns the streams' checkpoints as they are once this
// write is stored, without changing the streams.
func (a *accounting) checkpoints() []checkpoint {
	cps := make([]checkpoint, 0, len(a.order))
	for _, st := range a.order {
		cps = append(cps, a.deltas[st].apply(st.cp))
	}
	return cps
}

func (d *streamDelta) apply(cp checkpoint) checkpoint {
	cp.Records += d.counts.Records
	cp.Parsed += d.counts.Parsed
	cp.Unknown += d.counts.Unknown
	cp.Malformed += d.counts.Malformed
	cp.Bytes += d.counts.Bytes
	if !d.first.IsZero() && (cp.FirstTS.IsZero() || d.first.Before(cp.FirstTS)) {
		cp.FirstTS = d.first
	}
	if d.last.After(cp.LastTS) {
		cp.LastTS = d.last
	}
	return cp
}

// commit applies the write's counts to the streams.
func (a *accounting) commit() {
	for _, st := range a.order {
		d := a.deltas[st]
		st.cp = d.apply(st.cp)
		for _, id := range d.candIDs {
			delete(st.uncounted, id)
		}
	}
}
