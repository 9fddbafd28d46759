package chstore

import (
	"context"
	"fmt"
)

// Metric labels per series (migration 0010). A Prometheus sample's labels
// live in metric_series, one row per (series_id, node); samples written
// since carry empty label_keys/label_values, and samples written before
// keep their own. Every read of a sample's labels goes through
// metricSampleLabelsSQL, which takes the sample's own arrays when it has
// them and its series' otherwise, so old and new rows read the same.

// MetricSampleRow is one stored Prometheus sample with its labels.
type MetricSampleRow struct {
	Node        string
	Name        string
	SeriesID    uint64
	LabelKeys   []string
	LabelValues []string
	TSMs        uint64
	Value       float64
}

// metricSampleLabelsSQL reads the folded samples (of one metric, or all
// when the name is empty) with their labels. GLOBAL: on a cluster both
// tables are Distributed, and the series (a row per series, not per
// sample) are read once and sent to the shards; on one server it is a
// plain join.
const metricSampleLabelsSQL = `SELECT node, name, series_id,
 if(notEmpty(label_keys), label_keys, series_keys) AS keys,
 if(notEmpty(label_keys), label_values, series_values) AS vals, ts_ms, value
FROM (SELECT node, name, series_id, label_keys, label_values, ts_ms, value
 FROM metric_samples FINAL WHERE ? = '' OR name = ?) AS samples
GLOBAL ANY LEFT JOIN (SELECT series_id, node, label_keys AS series_keys, label_values AS series_values
 FROM metric_series FINAL WHERE ? = '' OR name = ?) AS series USING (series_id, node)
ORDER BY node, name, series_id, ts_ms`

// EachMetricSample calls fn for every stored sample of the metric name
// ("" for all) with its labels, in (node, name, series_id, ts_ms) order,
// streaming the rows.
func (s *Store) EachMetricSample(ctx context.Context, name string, fn func(MetricSampleRow) error) error {
	rows, done, err := s.Stream(ctx, metricSampleLabelsSQL, name, name, name, name)
	defer done()
	if err != nil {
		return fmt.Errorf("read metric samples: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r MetricSampleRow
		if err := rows.Scan(&r.Node, &r.Name, &r.SeriesID, &r.LabelKeys, &r.LabelValues, &r.TSMs, &r.Value); err != nil {
			return fmt.Errorf("read metric samples: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read metric samples: %w", err)
	}
	return nil
}
