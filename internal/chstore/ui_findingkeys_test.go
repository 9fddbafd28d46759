package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// Findings written after migration 0008 get their lookup keys from the
// materialized view (finding id, gateway request id, each foreign request
// and a non-zero room), and the finding page reads the newest copy by them.
func TestFindingKeysFollowInserts(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	st := chstore.NewUIStore(s, 0)
	ts := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	ins := func(id, run, req string, room uint64, foreign []string, created time.Time) {
		t.Helper()
		err := s.Exec(ctx, `INSERT INTO findings (finding_id, run_id, analyzer, severity, ts, first_ts, last_ts, gateway_request_id,
 bootstrap_room, foreign_request_keys, title, created_at)
SELECT ?, ?, 'over_threshold', 'HIGH', ?, ?, ?, ?, ?, ?, ?, ?`, id, run, ts, ts, ts, req, room, foreign, "title "+run, created)
		if err != nil {
			t.Fatal(err)
		}
	}
	ins("f-1", "run-0", "req-1", 7, []string{"req-2"}, ts)
	ins("f-1", "run-1", "req-1", 7, []string{"req-2"}, ts.Add(time.Hour))
	ins("f-2", "run-1", "", 0, nil, ts)

	var keys []struct {
		Key string `ch:"key"`
	}
	if err := s.Select(ctx, &keys, "SELECT DISTINCT key FROM finding_keys ORDER BY key"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.Key)
	}
	want := []string{"b:7", "f:f-1", "f:f-2", "r:req-1", "r:req-2"}
	if len(got) != len(want) {
		t.Fatalf("finding_keys = %v, want %v (no empty request, no room 0)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("finding_keys = %v, want %v", got, want)
		}
	}

	d, err := st.Finding(ctx, "f-1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Finding.RunID != "run-1" || d.Finding.Title != "title run-1" {
		t.Fatalf("finding = %+v, want the newest copy (run-1)", d.Finding)
	}
	if _, err := st.Finding(ctx, "f-none"); domain.KindOf(err) != domain.NotFound {
		t.Fatalf("missing finding: err = %v, want NotFound", err)
	}
}
