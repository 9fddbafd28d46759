package chstore_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

// migrationsBefore is the embedded migrations numbered below n.
func migrationsBefore(t *testing.T, n string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") || e.Name() >= n {
			continue
		}
		b, err := fs.ReadFile(migrations.FS, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = &fstest.MapFile{Data: b}
	}
	return out
}

// migratedBefore is an empty database with the migrations numbered below n
// applied: the state a later migration is tested from.
func migratedBefore(t *testing.T, n string) *chstore.Store {
	t.Helper()
	s := testdb.Empty(t)
	if _, err := newMigrator(t, s, migrationsBefore(t, n)).Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// A database holding samples with their own label arrays (before
// migration 0010) is migrated: their series are copied to metric_series
// with the earliest sample as first_seen, and samples written afterwards
// without labels read their series' labels, so old and new rows read alike.
func TestMetricSeriesBackfillAndReadThrough(t *testing.T) {
	ctx := context.Background()
	s := migratedBefore(t, "0010")
	t0 := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	x, err := s.OpenInsert(ctx, "metric_samples", strings.Fields("ts ts_ms node name series_id label_keys label_values value source ingested_at"))
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []time.Time{t0.Add(time.Minute), t0, t0.Add(2 * time.Minute)} {
		if err := x.AppendRow(ts, uint64(ts.UnixMilli()), "prefill-0", "sglang:context_len", uint64(7),
			[]string{"tp_rank"}, []string{"0"}, float64(i), "old.prom", t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Send(); err != nil {
		t.Fatal(err)
	}
	if _, err := newMigrator(t, s, nil).Up(ctx); err != nil {
		t.Fatal(err)
	}

	var first time.Time
	var keys []string
	if err := s.QueryRow(ctx, "SELECT first_seen, label_keys FROM metric_series FINAL WHERE series_id = 7 AND node = 'prefill-0'").Scan(&first, &keys); err != nil {
		t.Fatalf("backfilled series: %v", err)
	}
	if !first.Equal(t0) || len(keys) != 1 || keys[0] != "tp_rank" {
		t.Fatalf("backfilled series: first_seen %v, keys %v; want %v, [tp_rank]", first, keys, t0)
	}

	// A sample written as writers now write it, and its series.
	ts := t0.Add(3 * time.Minute)
	x, err = s.OpenInsert(ctx, "metric_samples", strings.Fields("ts ts_ms node name series_id value source ingested_at"))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.AppendRow(ts, uint64(ts.UnixMilli()), "decode-0", "sglang:context_len", uint64(9), 3.0, "new.prom", t0); err != nil {
		t.Fatal(err)
	}
	if err := x.Send(); err != nil {
		t.Fatal(err)
	}
	x, err = s.OpenInsert(ctx, "metric_series", strings.Fields("series_id node name label_keys label_values first_seen version ingested_at"))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.AppendRow(uint64(9), "decode-0", "sglang:context_len", []string{"tp_rank"}, []string{"1"}, ts, uint32(1), t0); err != nil {
		t.Fatal(err)
	}
	if err := x.Send(); err != nil {
		t.Fatal(err)
	}

	var got []string
	err = s.EachMetricSample(ctx, "sglang:context_len", func(r chstore.MetricSampleRow) error {
		got = append(got, r.Node+" "+strings.Join(r.LabelKeys, ",")+"="+strings.Join(r.LabelValues, ","))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"decode-0 tp_rank=1", "prefill-0 tp_rank=0", "prefill-0 tp_rank=0", "prefill-0 tp_rank=0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("samples with labels = %q, want %q", got, want)
	}
	var n int
	if err := s.EachMetricSample(ctx, "sglang:other", func(chstore.MetricSampleRow) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("another metric: %d samples, err %v; want none", n, err)
	}
}

// Migration 0016 turns metric_samples.source into LowCardinality(String):
// samples stored before it read back with the same sources, and samples
// written after it store theirs.
func TestMetricSampleSourceBecomesLowCardinality(t *testing.T) {
	ctx := context.Background()
	s := migratedBefore(t, "0016")
	t0 := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	cols := strings.Fields("ts ts_ms node name series_id value source ingested_at")
	write := func(from int, sources ...string) {
		t.Helper()
		x, err := s.OpenInsert(ctx, "metric_samples", cols)
		if err != nil {
			t.Fatal(err)
		}
		for i, src := range sources {
			ts := t0.Add(time.Duration(from+i) * time.Minute)
			if err := x.AppendRow(ts, uint64(ts.UnixMilli()), "prefill-0", "sglang:context_len", uint64(7), float64(i), src, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Send(); err != nil {
			t.Fatal(err)
		}
	}
	sourceType := func() string {
		t.Helper()
		var typ string
		if err := s.QueryRow(ctx, "SELECT type FROM system.columns WHERE database = currentDatabase() AND table = 'metric_samples' AND name = 'source'").Scan(&typ); err != nil {
			t.Fatal(err)
		}
		return typ
	}
	write(0, "/var/log/a.prom", "", "scrape http://10.0.0.1:30000/metrics", "/var/log/a.prom")
	if typ := sourceType(); typ != "String" {
		t.Fatalf("before 0016 source is %s, want String", typ)
	}
	if _, err := newMigrator(t, s, nil).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if typ := sourceType(); typ != "LowCardinality(String)" {
		t.Fatalf("after 0016 source is %s, want LowCardinality(String)", typ)
	}
	write(4, "import prometheus", "/var/log/a.prom")
	var got []string
	if err := s.QueryRow(ctx, "SELECT groupArray(source) FROM (SELECT source FROM metric_samples ORDER BY ts)").Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := "/var/log/a.prom||scrape http://10.0.0.1:30000/metrics|/var/log/a.prom|import prometheus|/var/log/a.prom"
	if strings.Join(got, "|") != want {
		t.Fatalf("sources = %q, want %q", strings.Join(got, "|"), want)
	}
}
