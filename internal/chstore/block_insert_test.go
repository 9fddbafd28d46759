package chstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/kvtrail/kvtrail/internal/chblock"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

// insRow is a row of every column type kvtrail's schema uses.
type insRow struct {
	ID   uint64    `ch:"id"`
	S    string    `ch:"s"`
	LC   string    `ch:"lc"`
	TS   time.Time `ch:"ts"`
	U8   uint8     `ch:"u8"`
	U16  uint16    `ch:"u16"`
	U32  uint32    `ch:"u32"`
	I16  int16     `ch:"i16"`
	I32  int32     `ch:"i32"`
	I64  int64     `ch:"i64"`
	F    float64   `ch:"f"`
	AS   []string  `ch:"astr"`
	AU32 []uint32  `ch:"au32"`
	AU64 []uint64  `ch:"au64"`
}

// insCols is the INSERT's column list, deliberately not the table's order.
var insCols = strings.Fields("lc id s ts u8 u16 u32 i16 i32 i64 f astr au32 au64")

const insTable = `(id UInt64, s String, lc LowCardinality(String), ts DateTime, u8 UInt8, u16 UInt16, u32 UInt32,
 i16 Int16, i32 Int32, i64 Int64, f Float64, astr Array(String), au32 Array(UInt32), au64 Array(UInt64),
 def String DEFAULT concat('d-', s))
ENGINE = MergeTree ORDER BY id`

// insRows are n rows with each type's edges: empty, quoted and multi-byte
// text, more distinct LowCardinality values than a one-byte key holds,
// extreme integers, empty and long arrays.
func insRows(n int) []insRow {
	out := make([]insRow, n)
	for i := range out {
		r := insRow{ID: uint64(i), S: fmt.Sprintf(`line %d "quoted" 'x' <b>ü</b>`, i), LC: fmt.Sprintf("node-%d", i%700),
			TS: time.Unix(1_782_864_000+int64(i), 0).UTC(), U8: uint8(i), U16: math.MaxUint16 - uint16(i), U32: uint32(i) * 7919,
			I16: int16(i%700 - 350), I32: int32(-i), I64: math.MinInt64 + int64(i), F: float64(i) / 7,
			AS: []string{}, AU32: []uint32{}, AU64: []uint64{}}
		if i%5 == 0 {
			r.S, r.LC = "", ""
		}
		if i%3 == 1 {
			r.AS = []string{"", fmt.Sprint(i), "ü,'"}
			r.AU32 = []uint32{uint32(i), math.MaxUint32}
			r.AU64 = make([]uint64, i%40)
			for j := range r.AU64 {
				r.AU64[j] = math.MaxUint64 - uint64(j)
			}
		}
		out[i] = r
	}
	return out
}

// insertRows writes rows into table through w: most as column slices in
// blocks of block rows, every 10th block row by row.
func insertRows(t *testing.T, s *chstore.Store, table string, rows []insRow, block int) {
	t.Helper()
	ctx := context.Background()
	w, err := s.OpenInsert(ctx, table, insCols)
	if err != nil {
		t.Fatal(err)
	}
	for lo, b := 0, 0; lo < len(rows); lo, b = lo+block, b+1 {
		chunk := rows[lo:min(lo+block, len(rows))]
		if b%10 == 9 {
			for _, r := range chunk {
				if err := w.AppendRow(r.LC, r.ID, r.S, r.TS, r.U8, r.U16, r.U32, r.I16, r.I32, r.I64, r.F, r.AS, r.AU32, r.AU64); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			if err := w.AppendColumns(insColumns(chunk)...); err != nil {
				t.Fatal(err)
			}
		}
		if w.Rows() != len(chunk) {
			t.Fatalf("Rows() = %d after appending %d", w.Rows(), len(chunk))
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Send(); err != nil {
		t.Fatal(err)
	}
}

// insColumns is rows as a slice per column, in insCols' order.
func insColumns(rows []insRow) []any {
	return []any{pick(rows, func(r insRow) string { return r.LC }), pick(rows, func(r insRow) uint64 { return r.ID }),
		pick(rows, func(r insRow) string { return r.S }), pick(rows, func(r insRow) time.Time { return r.TS }),
		pick(rows, func(r insRow) uint8 { return r.U8 }), pick(rows, func(r insRow) uint16 { return r.U16 }),
		pick(rows, func(r insRow) uint32 { return r.U32 }), pick(rows, func(r insRow) int16 { return r.I16 }),
		pick(rows, func(r insRow) int32 { return r.I32 }), pick(rows, func(r insRow) int64 { return r.I64 }),
		pick(rows, func(r insRow) float64 { return r.F }), pick(rows, func(r insRow) []string { return r.AS }),
		pick(rows, func(r insRow) []uint32 { return r.AU32 }), pick(rows, func(r insRow) []uint64 { return r.AU64 })}
}

func pick[T any](rows []insRow, f func(insRow) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

func readIns(t *testing.T, s *chstore.Store, table string) []insRow {
	t.Helper()
	var out []insRow
	if err := s.Select(context.Background(), &out, "SELECT id, s, lc, ts, u8, u16, u32, i16, i32, i64, f, astr, au32, au64 FROM "+
		table+" ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i].TS = out[i].TS.UTC()
	}
	return out
}

// The block path stores exactly the rows the driver stores, from column
// slices and from rows, over many blocks, with and without compression,
// and lets the server fill a column the INSERT leaves out.
func TestBlockInsertEqualsDriver(t *testing.T) {
	ctx := context.Background()
	rows := insRows(25_000)
	for _, comp := range []string{"none", "lz4"} {
		t.Run(comp, func(t *testing.T) {
			o := testdb.Options(t)
			o.Compression = comp
			blocks := openStore(t, o)
			do := o
			do.DriverInserts = true
			driver := openStore(t, do)
			for _, tbl := range []string{"ins_block", "ins_driver"} {
				if err := blocks.ExecDDL(ctx, "CREATE TABLE "+tbl+" "+insTable); err != nil {
					t.Fatal(err)
				}
			}
			insertRows(t, blocks, "ins_block", rows, 3000)
			if !chstore.ReadsBlocks(blocks) || chstore.BlockInserts(blocks) != 1 {
				t.Fatalf("the block store wrote through the driver (%d block inserts)", chstore.BlockInserts(blocks))
			}
			insertRows(t, driver, "ins_driver", rows, 3000)
			if n := chstore.BlockInserts(driver); n != 0 {
				t.Fatalf("DriverInserts: %d block inserts", n)
			}
			got, want := readIns(t, blocks, "ins_block"), readIns(t, blocks, "ins_driver")
			if len(got) != len(rows) {
				t.Fatalf("block path stored %d rows, want %d", len(got), len(rows))
			}
			if !reflect.DeepEqual(want, rows) {
				t.Fatal("the driver's rows differ from the rows inserted")
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], rows[i]) {
					t.Fatalf("row %d: block path stored %+v, want %+v", i, got[i], rows[i])
				}
			}
			var def string
			if err := blocks.QueryRow(ctx, "SELECT def FROM ins_block WHERE id = 7").Scan(&def); err != nil || def != "d-"+rows[7].S {
				t.Fatalf("default column: %q, %v", def, err)
			}

			// The same rows in one block of column slices, the arrays
			// encoded where they are (SendColumns), on both paths.
			for _, st := range []*chstore.Store{blocks, driver} {
				tbl := "ins_once_" + map[bool]string{true: "block", false: "driver"}[st == blocks]
				if err := st.ExecDDL(ctx, "CREATE TABLE "+tbl+" "+insTable); err != nil {
					t.Fatal(err)
				}
				before := chstore.BlockInserts(st)
				if err := chstore.InsertColumns(ctx, st, tbl, insCols, insColumns(rows)...); err != nil {
					t.Fatal(err)
				}
				if paths := chstore.BlockInserts(st) - before; paths != map[bool]int64{true: 1, false: 0}[st == blocks] {
					t.Fatalf("%s: %d block inserts", tbl, paths)
				}
				if got := readIns(t, st, tbl); !reflect.DeepEqual(got, rows) {
					t.Fatalf("%s: %d rows stored, not the %d rows inserted", tbl, len(got), len(rows))
				}
			}
		})
	}
}

// A refused INSERT fails with the server's own error, and a block the
// server cannot take (a value of the wrong type for a column) is refused
// before anything is sent; an aborted INSERT stores nothing of what was
// not sent.
func TestBlockInsertErrors(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testdb.Options(t))
	if _, err := s.OpenInsert(ctx, "no_such_table", insCols); !chstore.IsCode(err, chstore.CodeUnknownTable) || !strings.Contains(err.Error(), "no_such_table") {
		t.Fatalf("insert into a missing table: %v, want the server's unknown-table exception", err)
	}
	if err := s.ExecDDL(ctx, "CREATE TABLE ins_err "+insTable); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenInsert(ctx, "ins_err", []string{"id", "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("insert of a missing column: %v", err)
	}
	w, err := s.OpenInsert(ctx, "ins_err", []string{"id", "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendColumns([]int{1}, []string{"a"}); err == nil || !strings.Contains(err.Error(), "[]int") {
		t.Fatalf("appending []int to UInt64: %v", err)
	}
	_ = w.Abort()
	w, err = s.OpenInsert(ctx, "ins_err", []string{"id", "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendRow(uint64(1), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "range") {
		t.Fatalf("appending a time past DateTime's range: %v", err)
	}
	_ = w.Abort()

	w, err = s.OpenInsert(ctx, "ins_err", []string{"id", "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendColumns([]uint64{1, 2}, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM ins_err").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after an abort before any flush: %d rows, %v", n, err)
	}
	if !chstore.ReadsBlocks(s) {
		t.Fatal("a refused insert turned the block path off")
	}
}

// A server the block path cannot speak to gets the INSERT through the
// driver, and later ones too.
func TestBlockInsertFallsBack(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testdb.Options(t))
	if err := s.ExecDDL(ctx, "CREATE TABLE ins_fb "+insTable); err != nil {
		t.Fatal(err)
	}
	chstore.PointBlocksAt(s, testdb.NotClickHouse(t, "SSH-2.0-OpenSSH_9.6\r\n"))
	rows := insRows(100)
	insertRows(t, s, "ins_fb", rows, 40)
	if got := readIns(t, s, "ins_fb"); !reflect.DeepEqual(got, rows) {
		t.Fatalf("fallback stored %d rows, not the rows inserted", len(got))
	}
	if chstore.ReadsBlocks(s) {
		t.Fatal("after a failed block insert the store still uses blocks")
	}
}

// Every table of kvtrail's schema takes the block path: its column types
// are all ones the block path knows.
func TestBlockInsertKnowsTheSchema(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testdb.Options(t))
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var cols []struct {
		Table string `ch:"table"`
		Name  string `ch:"name"`
	}
	if err := s.Select(ctx, &cols, `SELECT table, name FROM system.columns
WHERE database = currentDatabase() AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') ORDER BY table`); err != nil {
		t.Fatal(err)
	}
	byTable := map[string][]string{}
	for _, c := range cols {
		byTable[c.Table] = append(byTable[c.Table], c.Name)
	}
	if len(byTable) < 20 {
		t.Fatalf("%d tables after migrating", len(byTable))
	}
	for table, names := range byTable {
		if err := chstore.OpenBlockInsert(ctx, s, table, names); err != nil {
			t.Errorf("%s: %v", table, err)
		}
	}
}

// chblock's INSERT written block by block, below OpenInsert: the server's header names the
// INSERT's columns with their types, the blocks written are stored once
// Close returns, and a block the server refuses fails Close (or the write
// after it) with the server's exception.
func TestChblockInsert(t *testing.T) {
	ctx := context.Background()
	o := testdb.Options(t)
	s := openStore(t, o)
	table := "chblock_insert"
	if err := s.ExecDDL(ctx, "CREATE TABLE "+table+" (n UInt64, s String, d String DEFAULT 'x') ENGINE = MergeTree ORDER BY n"); err != nil {
		t.Fatal(err)
	}
	opts := func(t *testing.T, compress bool) chblock.Options {
		return chblock.Options{Addrs: o.Addrs, Database: o.Database, DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
			Compress: compress}
	}
	count := func() uint64 {
		var n uint64
		if err := s.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, compress := range []bool{false, true} {
		before := count()
		in, err := chblock.OpenInsert(ctx, opts(t, compress), "INSERT INTO "+table+" (s, n) VALUES", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []chblock.Column{{Name: "s", Type: "String"}, {Name: "n", Type: "UInt64"}}
		if fmt.Sprint(in.Columns) != fmt.Sprint(want) {
			t.Fatalf("header %v, want %v", in.Columns, want)
		}
		var s proto.ColStr
		var n proto.ColUInt64
		for b := range 3 {
			s.Reset()
			n.Reset()
			// Past one compressed frame, and a first column past what
			// chblock holds of a block before it writes it out.
			for i := range 70_000 {
				s.Append(strings.Repeat("ü", i%40))
				n.Append(uint64(b*70_000 + i))
			}
			if err := in.Write(70_000, proto.Input{{Name: "s", Data: &s}, {Name: "n", Data: &n}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
		if got := count() - before; got != 210_000 {
			t.Fatalf("compress=%v: %d rows stored, want 210000", compress, got)
		}
	}
	// The second INSERT encoded into the buffers the first one handed
	// back (bufpool.go): each stored exactly its own values.
	var wantBytes, wantSum uint64
	for i := range 210_000 {
		wantBytes += uint64(len(strings.Repeat("ü", i%70_000%40)))
		wantSum += uint64(i)
	}
	var gotBytes, gotSum uint64
	if err := s.QueryRow(ctx, "SELECT sum(length(s)), sum(n) FROM "+table).Scan(&gotBytes, &gotSum); err != nil {
		t.Fatal(err)
	}
	if gotBytes != 2*wantBytes || gotSum != 2*wantSum {
		t.Fatalf("stored %d string bytes summing n to %d, want %d and %d", gotBytes, gotSum, 2*wantBytes, 2*wantSum)
	}

	in, err := chblock.OpenInsert(ctx, opts(t, false), "INSERT INTO "+table+" (n) VALUES", nil)
	if err != nil {
		t.Fatal(err)
	}
	var wrong proto.ColStr
	wrong.Append("not a number")
	err = in.Write(1, proto.Input{{Name: "n", Data: &wrong}})
	if err == nil {
		err = in.Close()
	}
	var ex *chblock.Exception
	if !errors.As(err, &ex) {
		t.Fatalf("a block of the wrong type: %v, want the server's exception", err)
	}
	t.Logf("refused: %v", ex)

	if _, err := chblock.OpenInsert(ctx, opts(t, false), "INSERT INTO no_such_table_here (n) VALUES", nil); !errors.As(err, &ex) {
		t.Fatalf("insert into a missing table: %v, want the server's exception", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := chblock.OpenInsert(cctx, opts(t, false), "INSERT INTO "+table+" (n) VALUES", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
