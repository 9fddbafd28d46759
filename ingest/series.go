package ingest

import (
	"time"
)

// Metric labels per series (migration 0010): a Prometheus sample's labels
// are stored once per series in metric_series, not on each sample. The
// writer sends a series row ahead of the first samples of the series that
// it has not stored yet in this run; seriesSeen remembers which.

// seriesKey is metric_series' key: the sample's series and node.
type seriesKey struct {
	id   uint64
	node string
}

// seriesRow is one metric_series row: a series first seen in a batch.
type seriesRow struct {
	key    seriesKey
	name   string
	keys   []string
	values []string
	first  time.Time
}

// maxSeenSeries bounds seriesSeen: past it the stored set is forgotten
// and series are written again as they recur, which the Replacing engine
// folds (a run over more distinct series than this costs rows, not
// correctness or memory).
const maxSeenSeries = 1 << 17

// seriesSeen is what a run has written to metric_series, for one flusher
// (one attempt of an ingest): per series the earliest first_seen written.
// stored holds what committed windows stored; pending what was sent in
// the open window. A batch writes a series row unless a row as early as
// its own first sample was written already, so however the sources are
// ordered the earliest row wins (first_seen is the series' first sample),
// and a sample is never committed without a row of its series: pending
// becomes stored only when its window commits, a failed window drops it,
// and a retry starts from an empty set.
type seriesSeen struct {
	stored  map[seriesKey]time.Time
	pending map[seriesKey]time.Time
}

// covers reports whether a row of k as early as first was written.
func (s *seriesSeen) covers(k seriesKey, first time.Time) bool {
	if s == nil {
		return false
	}
	if t, ok := s.pending[k]; ok && !first.Before(t) {
		return true
	}
	t, ok := s.stored[k]
	return ok && !first.Before(t)
}

// sent marks rows as sent in the open window.
func (s *seriesSeen) sent(rows []seriesRow) {
	if s == nil || len(rows) == 0 {
		return
	}
	if s.pending == nil {
		s.pending = map[seriesKey]time.Time{}
	}
	for _, r := range rows {
		if t, ok := s.pending[r.key]; !ok || r.first.Before(t) {
			s.pending[r.key] = r.first
		}
	}
}

// committed moves the open window's series to stored: its INSERTs are
// complete.
func (s *seriesSeen) committed() {
	if len(s.pending) == 0 {
		return
	}
	if s.stored == nil || len(s.stored)+len(s.pending) > maxSeenSeries {
		s.stored = make(map[seriesKey]time.Time, len(s.pending))
	}
	for k, first := range s.pending {
		if t, ok := s.stored[k]; !ok || first.Before(t) {
			s.stored[k] = first
		}
	}
	clear(s.pending)
}

// dropped forgets the open window's series: its INSERTs were not stored.
func (s *seriesSeen) dropped() { clear(s.pending) }

// newSeries returns a row for each series of ms, in the order of their
// first samples, with the earliest sample time of the batch as
// first_seen, but for those seen has written as early already.
func newSeries(ms []metricRow, seen *seriesSeen) []seriesRow {
	if len(ms) == 0 {
		return nil
	}
	var rows []seriesRow
	at := map[seriesKey]int{}
	for i := range ms {
		m := &ms[i]
		k := seriesKey{m.m.SeriesID, m.node}
		if j, ok := at[k]; ok {
			if m.m.TS.Before(rows[j].first) {
				rows[j].first = m.m.TS
			}
			continue
		}
		at[k] = len(rows)
		rows = append(rows, seriesRow{key: k, name: m.m.Name, keys: m.m.LabelKeys, values: m.m.LabelValues, first: m.m.TS})
	}
	if seen == nil {
		return rows
	}
	out := rows[:0]
	for _, r := range rows {
		if !seen.covers(r.key, r.first) {
			out = append(out, r)
		}
	}
	return out
}

// seriesWrite is the metric_series share of a batch's samples. Its rows
// are marked in seen once the last of them is appended to the window's
// INSERT (they become stored when the window commits).
func seriesWrite(ms []metricRow, now time.Time, seen *seriesSeen) tableWrite {
	rows := newSeries(ms, seen)
	fill := columns(rows,
		col(func(r *seriesRow) uint64 { return r.key.id }),
		col(func(r *seriesRow) string { return r.key.node }),
		col(func(r *seriesRow) string { return r.name }),
		col(func(r *seriesRow) []string { return orEmpty(r.keys) }),
		col(func(r *seriesRow) []string { return orEmpty(r.values) }),
		col(func(r *seriesRow) time.Time { return chTime(r.first) }),
		col(func(r *seriesRow) uint32 { return SeriesVersion(r.first) }),
		constant[seriesRow](now),
	)
	return tableWrite{"metric_series", len(rows), seriesCols, func(x TableWriter, lo, hi int) error {
		if err := fill(x, lo, hi); err != nil {
			return err
		}
		if hi == len(rows) {
			seen.sent(rows)
		}
		return nil
	}}
}

// SeriesVersion is metric_series' version column for a series first seen
// at first: the Replacing engine keeps the highest, so the earliest
// first_seen wins. DateTime ends in 2105, inside uint32 seconds.
func SeriesVersion(first time.Time) uint32 {
	return ^uint32(0) - uint32(chTime(first).Unix())
}

// metricColumns are metric_samples' columns in metricCols' order: typed
// slices only (the label arrays, appended row by row through reflection,
// are gone from the samples).
func metricColumns(ms []metricRow, now time.Time) func(TableWriter, int, int) error {
	return columns(ms,
		col(func(r *metricRow) time.Time { return chTime(r.m.TS) }),
		col(func(r *metricRow) uint64 { return uint64(max(r.m.TSMs, 0)) }),
		col(func(r *metricRow) string { return r.node }),
		col(func(r *metricRow) string { return r.m.Name }),
		col(func(r *metricRow) uint64 { return r.m.SeriesID }),
		col(func(r *metricRow) float64 { return r.m.Value }),
		col(func(r *metricRow) string { return r.source }),
		constant[metricRow](now),
	)
}
