package chstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/sqlcheck"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// On 18.16 retention drops whole expired partitions, except one that
// overlaps a case under legal hold, and keeps the current data.
func TestRetentionDropsExpiredPartitionsButNotHeldOnes(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	if !s.ServerVersion().Legacy() {
		t.Skip("the partition-dropping path is for servers without TTL")
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	weeks := []time.Time{
		time.Date(2026, 2, 3, 10, 0, 0, 0, time.UTC),  // expired
		time.Date(2026, 2, 17, 10, 0, 0, 0, time.UTC), // expired, but held
		time.Date(2026, 5, 27, 10, 0, 0, 0, time.UTC), // recent
	}
	b, err := s.PrepareBatch(ctx, "INSERT INTO raw_lines (ts, ts_ns, node, line_id, line)")
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range weeks {
		if err := b.Append(ts, uint64(ts.UnixNano()), "n", uint64(i+1), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	hold := "INSERT INTO cases (case_id, name, window_from, window_to, legal_hold, version) SELECT ?, ?, toDateTime(?), toDateTime(?), ?, ?"
	if err := s.Exec(ctx, hold, "held", "held case", uint32(weeks[1].Add(-time.Hour).Unix()), uint32(weeks[1].Add(time.Hour).Unix()), uint8(1), uint64(2)); err != nil {
		t.Fatal(err)
	}
	// An older version of another case was held, its latest is not.
	if err := s.Exec(ctx, hold, "released", "released", uint32(weeks[0].Unix()), uint32(weeks[0].Unix()), uint8(1), uint64(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, hold, "released", "released", uint32(weeks[0].Unix()), uint32(weeks[0].Unix()), uint8(0), uint64(2)); err != nil {
		t.Fatal(err)
	}

	res, err := s.ApplyRetention(ctx, 90*24*time.Hour, now, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].ID != "20260202" || len(res.Held) != 1 || res.Held[0].ID != "20260216" {
		t.Fatalf("dropped %+v held %+v", res.Dropped, res.Held)
	}
	var got []uint64
	rows, err := s.Query(ctx, "SELECT line_id FROM raw_lines ORDER BY line_id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	rows.Close()
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("lines left %v, want the held week's (2) and the recent one (3)", got)
	}
}

// The TTL statements for modern servers parse under the modern grammar and
// spare held spans.
func TestRetentionTTLStatements(t *testing.T) {
	holds := []chstore.HoldRange{{CaseID: "a", From: time.Unix(1780000000, 0), To: time.Unix(1780086400, 0)}, {CaseID: "b", From: time.Unix(1790000000, 0)}}
	for _, l := range []chstore.Layout{{Database: "kvtrail"}, {Database: "kvtrail", Cluster: "c"}} {
		stmts := chstore.TTLStatements(l, 90*24*time.Hour, holds)
		if len(stmts) != len(chstore.RetentionTables) {
			t.Fatalf("%d statements", len(stmts))
		}
		for _, q := range stmts {
			if err := sqlcheck.Check(q); err != nil {
				t.Error(err)
			}
			if !strings.Contains(q, "toIntervalSecond(7776000) DELETE WHERE NOT ((ts >= toDateTime(1780000000) AND ts <= toDateTime(1780086400)) OR (ts >= toDateTime(1790000000)))") {
				t.Errorf("TTL statement %q", q)
			}
			if l.Cluster != "" && !strings.Contains(q, "_local ON CLUSTER c ") {
				t.Errorf("cluster TTL statement %q", q)
			}
		}
	}
}
