package chstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The streaming writer: one INSERT fed in several blocks stores every row
// once, only on Send; unnamed columns get their defaults; Abort stores
// nothing; bad names and a wrong number of columns are errors before
// anything is sent.
func TestOpenInsertStreamsBlocks(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	if err := s.ExecDDL(ctx, `CREATE TABLE w (n UInt64, a String, b LowCardinality(String), c Array(String))
ENGINE = MergeTree ORDER BY n`); err != nil {
		t.Fatal(err)
	}
	count := func() (rows, distinctB uint64, emptyC uint64) {
		t.Helper()
		if err := s.QueryRow(ctx, "SELECT count(), uniqExact(b), countIf(empty(c)) FROM w").Scan(&rows, &distinctB, &emptyC); err != nil {
			t.Fatal(err)
		}
		return
	}

	x, err := s.OpenInsert(ctx, "w", []string{"n", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	const block, blocks = 5000, 3
	for k := 0; k < blocks; k++ {
		ns, bs, as := make([]uint64, block), make([]string, block), make([]string, block)
		for i := range ns {
			ns[i] = uint64(k*block + i)
			bs[i] = fmt.Sprint("tenant-", i%7)
			as[i] = strings.Repeat("x", i%13)
		}
		if err := x.AppendColumns(ns, bs, as); err != nil {
			t.Fatal(err)
		}
		if x.Rows() != block {
			t.Fatalf("rows held = %d, want %d", x.Rows(), block)
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.AppendRow(uint64(blocks*block), "tenant-x", "last"); err != nil {
		t.Fatal(err)
	}
	if rows, _, _ := count(); rows != 0 {
		t.Fatalf("%d rows visible before Send, want 0 (one INSERT)", rows)
	}
	if err := x.Send(); err != nil {
		t.Fatal(err)
	}
	if rows, distinct, empty := count(); rows != blocks*block+1 || distinct != 8 || empty != rows {
		t.Fatalf("stored %d rows, %d tenants, %d empty arrays; want %d, 8, all", rows, distinct, empty, blocks*block+1)
	}

	y, err := s.OpenInsert(ctx, "w", []string{"n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := y.AppendColumns([]uint64{1, 2}, []string{"a", "b"}); err == nil {
		t.Error("two column slices for a one-column insert: no error")
	}
	if err := y.AppendColumns([]uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := y.Abort(); err != nil {
		t.Fatal(err)
	}
	if rows, _, _ := count(); rows != blocks*block+1 {
		t.Fatalf("after Abort %d rows, want %d", rows, blocks*block+1)
	}

	for _, bad := range []struct {
		table string
		cols  []string
	}{
		{"w; DROP TABLE w", []string{"n"}},
		{"w", []string{"n) SELECT 1 --"}},
		{"w", []string{"N"}},
		{"w", nil},
		{"", []string{"n"}},
	} {
		if _, err := s.OpenInsert(ctx, bad.table, bad.cols); err == nil {
			t.Errorf("OpenInsert(%q, %q): no error", bad.table, bad.cols)
		}
	}
}
