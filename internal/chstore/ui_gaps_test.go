package chstore_test

import (
	"cmp"
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/migrations"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// A busy node's silence while others log is a gap (the completeness
// analyzer's rule, at its default threshold); an
// event-only log's long quiet is not, nor are epoch-stamped metric lines.
func TestGapsUseTheLogsOwnRate(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t)
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	ins := func(node, format string, from time.Time, n, stepSec int, idBase int) {
		t.Helper()
		err := db.Exec(ctx, `INSERT INTO raw_lines (ts, node, log_format, line_id, line)
SELECT toDateTime(?) + number * ?, ?, ?, ? + number, 'x' FROM system.numbers LIMIT ?`,
			from.Unix(), stepSec, node, format, idBase, n)
		if err != nil {
			t.Fatal(err)
		}
	}
	// busy: 100 lines/hour for 10 h, silent 3 h, 100 lines/hour for 5 h.
	ins("busy", "sglang", t0, 1000, 36, 0)
	ins("busy", "sglang", t0.Add(13*time.Hour), 500, 36, 10_000)
	// sparse: one glog line a day for 10 days.
	ins("sparse", "mooncake-glog", t0, 10, 86400, 20_000)
	// steady: a line a minute for 18 h, through busy's silence.
	ins("steady", "sglang", t0, 18*60, 60, 30_000)
	// prom: Prometheus text without timestamps lands at the epoch; with the
	// node's real lines it once made a "1970 -> 2026" gap.
	ins("prom", "prometheus", time.Unix(0, 0), 50, 1, 40_000)
	ins("prom", "prometheus", t0, 18*60, 60, 50_000)

	gaps, err := chstore.NewUIStore(db, 10*time.Minute).Gaps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) != 1 {
		t.Fatalf("gaps = %+v, want exactly the busy log's silence", gaps)
	}
	g := gaps[0]
	if g.Node != "busy" || g.Minutes != 180 || !g.From.Equal(t0.Add(10*time.Hour)) || !g.To.Equal(t0.Add(13*time.Hour)) {
		t.Fatalf("gap = %+v, want busy 10:00-13:00 (180 min)", g)
	}
}

// The minute counts read in several statements (server memory bounded by
// the lines each reads) are the counts of one statement over the window:
// no minute is split between two, duplicated rows count once, and each
// minute's first line is its smallest id.
func TestNodeMinutesInParts(t *testing.T) {
	ctx := context.Background()
	opts := testdb.Options(t)
	var counts atomic.Int32
	check := opts.OnStatement
	opts.OnStatement = func(sql string) {
		check(sql)
		if strings.Contains(sql, "uniqExact(line_id) AS lines") {
			counts.Add(1)
		}
	}
	db, err := chstore.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	m, err := chstore.NewMigrator(db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 13, 0, time.UTC)
	type key struct {
		node   string
		minute int64
	}
	want := map[key]domain.NodeMinute{}
	ins := func(node string, n, stepSec, idBase int) {
		t.Helper()
		err := db.Exec(ctx, `INSERT INTO raw_lines (ts, node, line_id, line)
SELECT toDateTime(?) + number * ?, ?, ? + number, 'x' FROM system.numbers LIMIT ?`,
			t0.Unix(), stepSec, node, idBase, n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			at := t0.Add(time.Duration(i*stepSec) * time.Second).Truncate(time.Minute)
			k := key{node, at.Unix()}
			c, ok := want[k]
			if id := uint64(idBase + i); !ok || id < c.FirstLine {
				c.FirstLine = id
			}
			c.Node, c.Minute = node, at
			c.Lines++
			want[k] = c
		}
	}
	ins("a", 300, 7, 0)
	ins("b", 100, 20, 1000)
	// a's first 50 lines again, in a part of their own: counted once.
	if err := db.Exec(ctx, `INSERT INTO raw_lines (ts, node, line_id, line)
SELECT toDateTime(?) + number * 7, 'a', number, 'x' FROM system.numbers LIMIT 50`, t0.Unix()); err != nil {
		t.Fatal(err)
	}
	from, to := t0.Add(-time.Hour), t0.Add(time.Hour)
	sorted := func(ms []domain.NodeMinute) []domain.NodeMinute {
		slices.SortFunc(ms, func(a, b domain.NodeMinute) int {
			return cmp.Or(cmp.Compare(a.Node, b.Node), a.Minute.Compare(b.Minute))
		})
		return ms
	}
	wantRows := sorted(slices.Collect(maps.Values(want)))
	for _, tc := range []struct {
		name     string
		perQuery int
		// the minute-count statements sent, at least and at most
		least, most int32
	}{
		{"one statement", 1 << 30, 1, 1},
		// 450 rows (50 of them copies) in 35 minutes: cut at minute
		// starts into statements of at most 40 rows.
		{"cut at minutes", 40, 9, 35},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer chstore.SetLinesPerQuery("minutes", tc.perQuery)()
			counts.Store(0)
			got, err := db.NodeMinutes(ctx, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if n := counts.Load(); n < tc.least || n > tc.most {
				t.Errorf("%d minute-count statements, want %d to %d", n, tc.least, tc.most)
			}
			if got = sorted(got); !reflect.DeepEqual(got, wantRows) {
				t.Errorf("NodeMinutes:\n got %v\nwant %v", got, wantRows)
			}
		})
	}
}
