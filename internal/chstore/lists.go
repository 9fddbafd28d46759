package chstore

import (
	"context"
	"fmt"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/internal/chblock"
	"github.com/kvtrail/kvtrail/internal/sqlcapture"
)

// A read by a long list of keys, rooms or line ids sends the list beside
// the statement as a table of its own (the native protocol's external
// data), which the statement names: "bootstrap_room GLOBAL IN kvt_rooms".
// Why: bound as a literal, 18.16 parses about 11 µs an id, and one
// statement with 189,000 rooms took 1.06 s against 0.38 s with the same
// rooms as a table (scale 100's request_facts); the literal also needed
// max_query_size raised and lists cut at 4 MB of text. GLOBAL: on a
// cluster the table goes to the shards with the statement, which a plain
// IN on a Distributed table would send without it.
//
// The list travels in the context (withLists), as clickhouse-go's own
// external tables do: Query, Stream and the block reads all send it.
type list struct {
	name, column string
	ids          []uint64 // a UInt64 column, unless keyed
	keys         []string // a String column
	keyed        bool
}

// Names of the lists the statements read.
const (
	listKeys  = "kvt_keys"
	listRooms = "kvt_rooms"
	listLines = "kvt_lines"
)

func idList(name string, ids []uint64) list { return list{name: name, column: "id", ids: ids} }
func keyList(name string, keys []string) list {
	return list{name: name, column: "key", keys: keys, keyed: true}
}

func (l list) typ() string {
	if l.keyed {
		return "String"
	}
	return "UInt64"
}

// driverTable is l as clickhouse-go (and the embedded engine) sends it.
func (l list) driverTable() (*ext.Table, error) {
	t, err := ext.NewTable(l.name, ext.Column(l.column, column.Type(l.typ())))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.name, err)
	}
	col := t.Block().Columns[0]
	if l.keyed {
		_, err = col.Append(l.keys)
	} else {
		_, err = col.Append(l.ids)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.name, err)
	}
	return t, nil
}

// blockTable is l as the block reader sends it.
func (l list) blockTable() chblock.Table {
	var data proto.ColInput
	if l.keyed {
		var c proto.ColStr
		for _, k := range l.keys {
			c.Append(k)
		}
		data = &c
	} else {
		c := proto.ColUInt64(l.ids)
		data = &c
	}
	return chblock.Table{Name: l.name, Columns: proto.Input{{Name: l.column, Data: data}}}
}

// captured is how the capture for the modern-engine replay names l.
func (l list) captured() sqlcapture.Table {
	return sqlcapture.Table{Name: l.name, Structure: l.column + " " + l.typ()}
}

type listsKey struct{}

// withLists sends lists with every statement run under the returned
// context.
func withLists(ctx context.Context, lists ...list) context.Context {
	return context.WithValue(ctx, listsKey{}, lists)
}

func listsOf(ctx context.Context) []list {
	l, _ := ctx.Value(listsKey{}).([]list)
	return l
}

// ExternalConn is a Conn that takes a query's external tables as an
// argument (the embedded engine) rather than from clickhouse.Context.
type ExternalConn interface {
	QueryExternal(ctx context.Context, tables []*ext.Table, query string, args ...any) (driver.Rows, error)
}

// queryConn runs a query on the connection with the lists ctx carries.
func (s *Store) queryConn(ctx context.Context, lists []list, sql string, args ...any) (driver.Rows, error) {
	if len(lists) == 0 {
		return s.conn.Query(ctx, sql, args...)
	}
	tables := make([]*ext.Table, len(lists))
	for i, l := range lists {
		t, err := l.driverTable()
		if err != nil {
			return nil, err
		}
		tables[i] = t
	}
	if ec, ok := s.conn.(ExternalConn); ok {
		return ec.QueryExternal(ctx, tables, sql, args...)
	}
	return s.conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(tables...)), sql, args...)
}

func blockTables(lists []list) []chblock.Table { return mapLists(lists, list.blockTable) }

func capturedTables(lists []list) []sqlcapture.Table { return mapLists(lists, list.captured) }

// mapLists is f of each list, nil for none.
func mapLists[T any](lists []list, f func(list) T) []T {
	if len(lists) == 0 {
		return nil
	}
	out := make([]T, len(lists))
	for i, l := range lists {
		out[i] = f(l)
	}
	return out
}
