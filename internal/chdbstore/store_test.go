//go:build chdb

package chdbstore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
)

var testEngine *Engine

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvtrail-chdbstore-")
	if err != nil {
		panic(err)
	}
	testEngine, err = OpenEngine(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	testEngine.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// A batch written through the driver's column code and read back through
// it gives the values that went in, with the types kvtrail uses.
func TestBatchRoundTrip(t *testing.T) {
	ctx := context.Background()
	if v := testEngine.Version(); v.Major < 26 {
		t.Fatalf("engine version %s, want 26.x", v)
	}
	s, err := testEngine.Open("rt")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, `CREATE TABLE IF NOT EXISTS t (ts DateTime, ts_ns UInt64, node LowCardinality(String), tags Array(String),
 n Nullable(UInt64), f Float64) ENGINE = ReplacingMergeTree ORDER BY (node, ts)`); err != nil {
		t.Fatal(err)
	}
	x, err := s.PrepareBatch(ctx, "INSERT INTO t (ts, ts_ns, node, tags, n, f)")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	seven := uint64(7)
	if err := x.Append(ts, uint64(5), "p0", []string{"a", "b"}, &seven, 1.5); err != nil {
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	// Column-wise, as ingest appends.
	for i, col := range []any{[]time.Time{ts.Add(time.Second)}, []uint64{6}, []any{"d0"}, [][]string{{}}, []*uint64{nil}, []float64{-2}} {
		if err := x.Column(i).Append(col); err != nil {
			t.Fatalf("column %d: %v", i, err)
		}
	}
	if err := x.Send(); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Query(ctx, "SELECT ts, ts_ns, node, tags, n, f FROM t WHERE ts >= ? ORDER BY ts", ts)
	if err != nil {
		t.Fatal(err)
	}
	type r struct {
		ts   time.Time
		ns   uint64
		node string
		tags []string
		n    *uint64
		f    float64
	}
	var got []r
	for rows.Next() {
		var x r
		if err := rows.Scan(&x.ts, &x.ns, &x.node, &x.tags, &x.n, &x.f); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if len(got) != 2 || !got[0].ts.Equal(ts) || got[0].ns != 5 || got[0].node != "p0" || len(got[0].tags) != 2 ||
		got[0].n == nil || *got[0].n != 7 || got[0].f != 1.5 || got[1].node != "d0" || got[1].n != nil || got[1].f != -2 {
		t.Fatalf("round trip: %+v", got)
	}
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM t WHERE node = ?", "p0").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
	if err := s.QueryRow(ctx, "SELECT ts_ns FROM t WHERE node = 'none'").Scan(&n); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("no rows: %v", err)
	}
	if err := s.Exec(ctx, "SELECT no_such_column FROM t"); err == nil {
		t.Fatal("bad statement: no error")
	}
	// Server errors carry their code, as from a server: the migrator
	// branches on them.
	if err := s.Exec(ctx, "SELECT 1 FROM no_such_table"); !chstore.IsCode(err, chstore.CodeUnknownTable) {
		t.Fatalf("unknown table: %v, want code %d", err, chstore.CodeUnknownTable)
	}
	if err := s.Exec(ctx, "CREATE TABLE t (x UInt8) ENGINE = Memory"); !chstore.IsCode(err, chstore.CodeTableAlreadyExists) {
		t.Fatalf("existing table: %v, want code %d", err, chstore.CodeTableAlreadyExists)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
