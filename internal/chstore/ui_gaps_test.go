package chstore_test

import (
	"context"
	"testing"
	"time"

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
