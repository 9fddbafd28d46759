package promimport

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// Store is what this package needs from ClickHouse (internal/chstore.Store
// satisfies it): one streaming INSERT into a table.
type Store interface {
	OpenInsert(ctx context.Context, table string, columns []string) (TableWriter, error)
}

// TableWriter is one open INSERT (the identical type
// internal/chstore.TableWriter names).
type TableWriter = interface {
	AppendColumns(cols ...any) error
	AppendRow(vals ...any) error
	Rows() int
	Flush() error
	Send() error
	Abort() error
}

// metricColumns are the metric_samples columns writeBatch appends, in its
// order. Listed explicitly: a column added later gets its default. The
// labels are not among them: since migration 0010 they are stored once
// per series in metric_series (seriesColumns), and a sample's
// label_keys/label_values stay empty.
var (
	metricColumns = strings.Fields(`ts ts_ms node name series_id value source ingested_at`)
	seriesColumns = strings.Fields(`series_id node name label_keys label_values first_seen version ingested_at`)
)

// maxBatchRows bounds one INSERT so a large import streams in pieces rather
// than building one huge block in memory.
const maxBatchRows = 50_000

// Row is one sample with the node it belongs to and where it came from.
type Row struct {
	Node   string
	Source string
	Sample parse.MetricSample
}

// maxDateTime is the end of ClickHouse DateTime's range.
var maxDateTime = time.Date(2105, 12, 31, 0, 0, 0, 0, time.UTC)

// seriesKey is metric_series' key.
type seriesKey struct {
	id   uint64
	node string
}

// maxSeenSeries bounds seriesSeen; past it the set is forgotten and series
// are written again as they recur (the Replacing engine folds them).
const maxSeenSeries = 1 << 17

// seriesSeen is what an Importer or Scraper has stored in metric_series:
// per series the earliest first_seen written, so each series is written
// once per process (and again only for an earlier sample), not with every
// scrape round or query_range window. A series is added only after its
// row's INSERT returned, and its samples are written after that, so a
// stored sample always has its series.
type seriesSeen struct {
	mu     sync.Mutex
	stored map[seriesKey]time.Time
}

// missing returns a row for each series of rows (the earliest sample time
// as first_seen) but those stored as early already.
func (s *seriesSeen) missing(rows []Row) []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Row
	at := map[seriesKey]int{}
	for _, r := range rows {
		k := seriesKey{r.Sample.SeriesID, r.Node}
		if j, ok := at[k]; ok {
			if r.Sample.TS.Before(out[j].Sample.TS) {
				out[j].Sample.TS = r.Sample.TS
			}
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	kept := out[:0]
	for _, r := range out {
		if t, ok := s.stored[seriesKey{r.Sample.SeriesID, r.Node}]; !ok || r.Sample.TS.Before(t) {
			kept = append(kept, r)
		}
	}
	return kept
}

func (s *seriesSeen) add(rows []Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stored == nil || len(s.stored)+len(rows) > maxSeenSeries {
		s.stored = make(map[seriesKey]time.Time, len(rows))
	}
	for _, r := range rows {
		k := seriesKey{r.Sample.SeriesID, r.Node}
		if t, ok := s.stored[k]; !ok || r.Sample.TS.Before(t) {
			s.stored[k] = r.Sample.TS
		}
	}
}

// writeRows inserts rows in batches of at most maxBatchRows, each batch's
// new series first.
func writeRows(ctx context.Context, s Store, seen *seriesSeen, rows []Row) error {
	now := time.Now().UTC()
	for len(rows) > 0 {
		n := min(len(rows), maxBatchRows)
		series := seen.missing(rows[:n])
		if len(series) > 0 {
			if err := writeSeries(ctx, s, series, now); err != nil {
				return err
			}
			seen.add(series)
		}
		if err := writeBatch(ctx, s, rows[:n], now); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// writeSeries inserts one metric_series row per element of series.
func writeSeries(ctx context.Context, s Store, series []Row, now time.Time) error {
	b, err := s.OpenInsert(ctx, "metric_series", seriesColumns)
	if err != nil {
		return fmt.Errorf("prepare insert into metric_series: %w", err)
	}
	ids, nodes, names := make([]uint64, len(series)), make([]string, len(series)), make([]string, len(series))
	keys, vals := make([][]string, len(series)), make([][]string, len(series))
	first, version, at := make([]time.Time, len(series)), make([]uint32, len(series)), make([]time.Time, len(series))
	for i, r := range series {
		m := r.Sample
		ids[i], nodes[i], names[i] = m.SeriesID, r.Node, m.Name
		keys[i], vals[i] = m.LabelKeys, m.LabelValues
		if keys[i] == nil { // the driver rejects nil for Array columns on some versions
			keys[i], vals[i] = []string{}, []string{}
		}
		first[i], _ = clampTime(m.TS)
		// 0010_metric_series.sql: the highest version, the earliest first_seen, wins.
		version[i] = ^uint32(0) - uint32(first[i].Unix())
		at[i] = now
	}
	if err := b.AppendColumns(ids, nodes, names, keys, vals, first, version, at); err != nil {
		_ = b.Abort()
		return fmt.Errorf("append to metric_series: %w", err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d rows into metric_series: %w", len(series), err)
	}
	return nil
}

// writeBatch inserts rows into metric_samples as typed columns (no
// per-row reflection in the driver but for the LowCardinality columns).
func writeBatch(ctx context.Context, s Store, rows []Row, now time.Time) error {
	b, err := s.OpenInsert(ctx, "metric_samples", metricColumns)
	if err != nil {
		return fmt.Errorf("prepare insert into metric_samples: %w", err)
	}
	n := len(rows)
	ts, ms, nodes, names := make([]time.Time, n), make([]uint64, n), make([]string, n), make([]string, n)
	ids, values, sources, at := make([]uint64, n), make([]float64, n), make([]string, n), make([]time.Time, n)
	for i, r := range rows {
		m := r.Sample
		ts[i], ms[i] = clampTime(m.TS)
		nodes[i], names[i], ids[i], values[i], sources[i], at[i] = r.Node, m.Name, m.SeriesID, m.Value, r.Source, now
	}
	if err := b.AppendColumns(ts, ms, nodes, names, ids, values, sources, at); err != nil {
		_ = b.Abort()
		return fmt.Errorf("append to metric_samples: %w", err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d rows into metric_samples: %w", len(rows), err)
	}
	return nil
}

// clampTime keeps a sample time inside DateTime's range (1970..2105) and
// returns it with its millisecond key.
func clampTime(t time.Time) (time.Time, uint64) {
	switch {
	case t.Before(time.Unix(0, 0)):
		t = time.Unix(0, 0)
	case t.After(maxDateTime):
		t = maxDateTime
	}
	return t.UTC(), uint64(t.UnixMilli())
}
