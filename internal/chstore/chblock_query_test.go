package chstore_test

// The block reader's protocol tests (internal/chblock): kvtrail's SQL,
// these probes of system.numbers included, is written in this package.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/kvtrail/kvtrail/internal/chblock"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

func chblockOpts(t *testing.T, compress bool) chblock.Options {
	return chblock.Options{Addrs: []string{testdb.Addr(t)}, Database: "default", DialTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, Compress: compress}
}

// chblockRowsSQL spans several blocks (65,536 rows each by default), repeats its
// LowCardinality and interned values across them, and holds the edge
// values of each type: empty and multi-byte strings, negative and extreme
// integers.
const chblockRowsSQL = `SELECT number AS n, toInt16(toInt16(number % 700) - 350) AS i,
 toLowCardinality(if(number % 11 = 0, '', concat('node-', toString(number % 13)))) AS lc,
 if(number % 5 = 0, '', concat('rid-ü-', toString(number), '\'"<x>')) AS s,
 concat('tenant-', toString(number % 3)) AS t,
 toFloat64(number) / 7 AS f, toUInt16(number % 600) AS u16, toUInt64(18446744073709551615 - number) AS big
FROM system.numbers LIMIT 200003`

type blockRow struct {
	n        uint64
	i        int16
	lc, s, t string
	f        float64
	u16      uint16
	big      uint64
}

// driverRows reads chblockRowsSQL through clickhouse-go: what the block reader
// must give.
func driverRows(t *testing.T) []blockRow {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{testdb.Addr(t)}, Auth: clickhouse.Auth{Database: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(context.Background(), chblockRowsSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []blockRow
	for rows.Next() {
		var r blockRow
		if err := rows.Scan(&r.n, &r.i, &r.lc, &r.s, &r.t, &r.f, &r.u16, &r.big); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type blockCols struct {
	n, big proto.ColUInt64
	i      proto.ColInt16
	lc, s  chblock.Str
	tn     chblock.Str
	f      proto.ColFloat64
	u16    proto.ColUInt16
}

func (c *blockCols) results() proto.Results {
	c.tn.Intern = true
	return proto.Results{{Name: "n", Data: &c.n}, {Name: "i", Data: &c.i}, {Name: "lc", Data: &c.lc},
		{Name: "s", Data: &c.s}, {Name: "t", Data: &c.tn}, {Name: "f", Data: &c.f}, {Name: "u16", Data: &c.u16},
		{Name: "big", Data: &c.big}}
}

func blockRows(t *testing.T, o chblock.Options) ([]blockRow, int) {
	t.Helper()
	var (
		c      blockCols
		out    []blockRow
		blocks int
	)
	err := chblock.Query(context.Background(), o, chblockRowsSQL, nil, c.results(), func(n int) error {
		blocks++
		for i := range n {
			out = append(out, blockRow{c.n[i], c.i[i], c.lc.Row(i), c.s.Row(i), c.tn.Row(i), c.f[i], c.u16[i], c.big[i]})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, blocks
}

func TestChblockBlocksEqualTheDriversRows(t *testing.T) {
	want := driverRows(t)
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("lz4=%v", compress), func(t *testing.T) {
			got, blocks := blockRows(t, chblockOpts(t, compress))
			if blocks < 3 {
				t.Errorf("%d blocks: the test must cross block boundaries", blocks)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d: got %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// A LowCardinality value is one string however many rows and blocks hold
// it, and so is an interned plain value: reading them allocates nothing
// per row.
func TestChblockRepeatedValuesAreShared(t *testing.T) {
	var (
		c     blockCols
		first = map[string]string{}
		same  = true
	)
	check := func(v string) {
		if v == "" {
			return
		}
		if f, ok := first[v]; !ok {
			first[v] = v
		} else if unsafe.StringData(f) != unsafe.StringData(v) {
			same = false
		}
	}
	err := chblock.Query(context.Background(), chblockOpts(t, false), chblockRowsSQL, nil, c.results(), func(n int) error {
		for i := range n {
			check(c.lc.Row(i))
			check(c.tn.Row(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Error("a repeated value was copied into a new string")
	}
	if len(first) != 13+3 {
		t.Errorf("%d distinct values, want 16", len(first))
	}
}

func TestChblockServerErrorIsAnException(t *testing.T) {
	var n proto.ColUInt64
	err := chblock.Query(context.Background(), chblockOpts(t, false), "SELECT number FROM no_such_table", nil, proto.Results{{Name: "number", Data: &n}}, func(int) error { return nil })
	var ex *chblock.Exception
	if !errors.As(err, &ex) || ex.Code != 60 {
		t.Fatalf("err = %v, want exception 60 (unknown table)", err)
	}
	var pe *chblock.ProtocolError
	if errors.As(err, &pe) {
		t.Error("a server exception must not read as a protocol failure (it would trigger a fallback)")
	}
	o := chblockOpts(t, false)
	o.User = "nobody_here"
	if err := chblock.Query(context.Background(), o, "SELECT 1", nil, nil, nil); !errors.As(err, &ex) {
		t.Fatalf("unknown user: err = %v, want an exception", err)
	}
}

// Columns that do not match the query fail with a clear error, not a
// protocol failure and not a silent misread.
func TestChblockColumnMismatch(t *testing.T) {
	var s chblock.Str
	var u proto.ColUInt32
	for name, res := range map[string]proto.Results{
		"type":  {{Name: "number", Data: &u}},
		"name":  {{Name: "other", Data: &s}},
		"count": {{Name: "number", Data: &u}, {Name: "x", Data: &s}},
		"str":   {{Name: "number", Data: &s}},
	} {
		err := chblock.Query(context.Background(), chblockOpts(t, false), "SELECT number FROM system.numbers LIMIT 10", nil, res, func(int) error { return nil })
		var pe *chblock.ProtocolError
		if err == nil || errors.As(err, &pe) {
			t.Errorf("%s mismatch: err = %v", name, err)
		}
	}
}

func TestChblockCallbackErrorStopsTheRead(t *testing.T) {
	stop := errors.New("enough")
	var n proto.ColUInt64
	calls := 0
	err := chblock.Query(context.Background(), chblockOpts(t, false), "SELECT number FROM system.numbers LIMIT 1000000", nil,
		proto.Results{{Name: "number", Data: &n}}, func(int) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("err = %v after %d calls, want the callback's error after one", err, calls)
	}
}

func TestChblockCancelStopsAnEndlessRead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n proto.ColUInt64
	rows := 0
	done := make(chan error, 1)
	go func() {
		done <- chblock.Query(ctx, chblockOpts(t, false), "SELECT number FROM system.numbers", nil, proto.Results{{Name: "number", Data: &n}},
			func(k int) error {
				if rows += k; rows > 100_000 {
					cancel()
				}
				return nil
			})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled read did not return")
	}
}

// Nothing listening, or something that is not ClickHouse: a protocol
// failure before any block, which the store answers by falling back.
func TestChblockNotClickHouse(t *testing.T) {
	garbage := testdb.NotClickHouse(t, "HTTP/1.1 400 Bad Request\r\n\r\n")
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := closed.Addr().String()
	closed.Close()
	for name, addrs := range map[string][]string{"garbage": {garbage}, "refused": {dead}} {
		o := chblock.Options{Addrs: addrs, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second}
		err := chblock.Query(context.Background(), o, "SELECT 1", nil, nil, nil)
		var pe *chblock.ProtocolError
		if !errors.As(err, &pe) || pe.Started {
			t.Errorf("%s: err = %v, want a protocol failure before any block", name, err)
		}
	}
	// The next address is tried when one refuses.
	var n proto.ColUInt8
	o := chblockOpts(t, false)
	o.Addrs = append([]string{dead}, o.Addrs...)
	if err := chblock.Query(context.Background(), o, "SELECT 1 AS one", nil, proto.Results{{Name: "one", Data: &n}}, func(int) error { return nil }); err != nil {
		t.Errorf("second address: %v", err)
	}
}

// Settings reach the server: a statement longer than the default
// max_query_size (256 KiB) runs with it raised, and fails without.
func TestChblockSettings(t *testing.T) {
	long := "SELECT toUInt64(length([" + strings.Repeat("1,", 200_000) + "1])) AS x"
	var x proto.ColUInt64
	read := func(settings []chblock.Setting) error {
		return chblock.Query(context.Background(), chblockOpts(t, false), long, settings, proto.Results{{Name: "x", Data: &x}}, func(int) error { return nil })
	}
	var ex *chblock.Exception
	if err := read(nil); !errors.As(err, &ex) || ex.Code != 62 {
		t.Fatalf("without the setting: err = %v, want a syntax error (query size)", err)
	}
	if err := read([]chblock.Setting{{Name: "max_query_size", Value: 1 << 20}, {Name: "max_threads", Value: 1}}); err != nil {
		t.Fatalf("with max_query_size raised: %v", err)
	}
	if len(x) != 1 || x[0] != 200_001 {
		t.Fatalf("x = %v, want [200001]", x)
	}
	if err := read([]chblock.Setting{{Name: "no_such_setting", Value: 1}}); !errors.As(err, &ex) {
		t.Fatalf("an unknown setting: err = %v, want the server's exception", err)
	}
}
