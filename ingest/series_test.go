package ingest

import (
	"github.com/kvtrail/kvtrail/ingest/parse"
	"testing"
	"time"
)

// seriesSeen marks a series written only when the window holding its row
// commits, and writes it again for an earlier sample.
func TestSeriesSeen(t *testing.T) {
	t0 := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	k := seriesKey{7, "prefill-0"}
	row := func(first time.Time) []metricRow {
		return []metricRow{{node: k.node, m: metricSample(k.id, first.Add(time.Minute))}, {node: k.node, m: metricSample(k.id, first)}}
	}
	steps := []struct {
		name  string
		rows  []metricRow
		after func(*seriesSeen)
		want  []time.Time // first_seen of the rows written
	}{
		{"new series, its window fails", row(t0), (*seriesSeen).dropped, []time.Time{t0}},
		{"written again, its window commits", row(t0), (*seriesSeen).committed, []time.Time{t0}},
		{"stored: later samples", row(t0.Add(time.Hour)), nil, nil},
		{"stored: the same first sample", row(t0), nil, nil},
		{"an earlier sample", row(t0.Add(-time.Hour)), nil, []time.Time{t0.Add(-time.Hour)}},
		{"pending covers the same window", row(t0.Add(-time.Hour)), nil, nil},
	}
	var seen seriesSeen
	for _, st := range steps {
		got := newSeries(st.rows, &seen)
		if len(got) != len(st.want) {
			t.Fatalf("%s: %d rows, want %d", st.name, len(got), len(st.want))
		}
		for i := range got {
			if !got[i].first.Equal(st.want[i]) {
				t.Fatalf("%s: first_seen %v, want %v", st.name, got[i].first, st.want[i])
			}
		}
		seen.sent(got)
		if st.after != nil {
			st.after(&seen)
		}
	}
	if got := newSeries(row(t0), nil); len(got) != 1 {
		t.Fatalf("without a set: %d rows for one series, want 1", len(got))
	}
}

func metricSample(id uint64, ts time.Time) parse.MetricSample {
	return parse.MetricSample{TS: ts, TSMs: ts.UnixMilli(), Name: "m", SeriesID: id, LabelKeys: []string{"a"}, LabelValues: []string{"b"}}
}
