package promimport

import (
	"context"
	"fmt"
	"strings"
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
// order. Listed explicitly: a column added later gets its default.
var metricColumns = strings.Fields(`ts ts_ms node name series_id label_keys label_values value source ingested_at`)

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

// writeRows inserts rows in batches of at most maxBatchRows.
func writeRows(ctx context.Context, s Store, rows []Row) error {
	now := time.Now().UTC()
	for len(rows) > 0 {
		n := min(len(rows), maxBatchRows)
		if err := writeBatch(ctx, s, rows[:n], now); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func writeBatch(ctx context.Context, s Store, rows []Row, now time.Time) error {
	b, err := s.OpenInsert(ctx, "metric_samples", metricColumns)
	if err != nil {
		return fmt.Errorf("prepare insert into metric_samples: %w", err)
	}
	for _, r := range rows {
		m := r.Sample
		keys, vals := m.LabelKeys, m.LabelValues
		if keys == nil { // the driver rejects nil for Array columns on some versions
			keys, vals = []string{}, []string{}
		}
		ts, ms := clampTime(m.TS)
		if err := b.AppendRow(ts, ms, r.Node, m.Name, m.SeriesID, keys, vals, m.Value, r.Source, now); err != nil {
			_ = b.Abort()
			return fmt.Errorf("append to metric_samples: %w", err)
		}
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
