package chstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/kvtrail/kvtrail/internal/chblock"
)

// Inserts take the block path (internal/chblock) where reads do: ingest
// and the analysis hand OpenInsert whole typed columns, which go into
// ch-go's columns with a copy each (but for the arrays of a block sent at
// once: SendColumns), where the driver appended them value by value
// through reflection (and each LowCardinality value through a map of
// interfaces). The rows stored are the same (TestBlockInsertEqualsDriver).
//
// An INSERT whose column types the block path does not know, or a server
// it cannot speak to before anything was sent, goes through the driver.

// errBlockTypes is an INSERT the block path has no column for.
var errBlockTypes = errors.New("a column type the block insert does not know")

// openBlockInsert opens insert (INSERT INTO t (columns)) on the block path.
func (s *Store) openBlockInsert(ctx context.Context, insert string, columns []string) (*blockWriter, error) {
	b := s.blocks
	in, err := chblock.OpenInsert(ctx, b.opts, insert+" VALUES", b.base)
	if err != nil {
		return nil, asDriverError(err)
	}
	w, err := newBlockWriter(in, columns)
	if err != nil {
		in.Abort()
		return nil, err
	}
	b.inserts.Add(1)
	return w, nil
}

// OpenInsert: see IngestStatements.OpenInsert. On a server reached over
// the network it writes blocks itself (above), else through the driver.
func (s *Store) OpenInsert(ctx context.Context, table string, columns []string) (TableWriter, error) {
	b := s.blocks
	if b == nil || b.off.Load() || s.opts.DriverInserts {
		return s.ingest().OpenInsert(ctx, table, columns)
	}
	insert, err := insertStatement(table, columns)
	if err != nil {
		return nil, err
	}
	s.see(insert)
	w, err := s.openBlockInsert(ctx, insert, columns)
	var pe *chblock.ProtocolError
	switch {
	case err == nil:
		s.answered(insert, nil, nil)
		return w, nil
	case errors.Is(err, errBlockTypes):
		// This table only: the driver converts any type.
		return s.ingest().OpenInsert(ctx, table, columns)
	case errors.As(err, &pe) && ctx.Err() == nil:
		// The server could not be spoken to this way, and nothing was
		// sent that it acted on. If the driver can write, it does from
		// now on (reads too); if not, the server is down.
		x, derr := s.ingest().OpenInsert(ctx, table, columns)
		if derr == nil && b.off.CompareAndSwap(false, true) {
			slog.Warn("ClickHouse block inserts failed; writing through the driver from now on", "err", err)
		}
		return x, derr
	}
	s.answered(insert, nil, err)
	return nil, err
}

// blockWriter is a TableWriter on the block path.
type blockWriter struct {
	in *chblock.Insert
	// cols are in the caller's column order; input in the server's, and
	// order the caller's index of each input column.
	cols  []insertCol
	names []string
	input proto.Input
	order []int
	rows  int
}

func newBlockWriter(in *chblock.Insert, columns []string) (*blockWriter, error) {
	if len(in.Columns) != len(columns) {
		return nil, fmt.Errorf("%w: the server's insert header has %d columns for %d named", errBlockTypes, len(in.Columns), len(columns))
	}
	w := &blockWriter{in: in, cols: make([]insertCol, len(columns)), names: columns}
	byName := map[string]int{}
	for i, c := range columns {
		byName[c] = i
	}
	for _, h := range in.Columns {
		i, ok := byName[h.Name]
		if !ok {
			return nil, fmt.Errorf("%w: the server's insert header names %q", errBlockTypes, h.Name)
		}
		c := newInsertCol(h.Type)
		if c == nil {
			return nil, fmt.Errorf("%w: %s %s", errBlockTypes, h.Name, h.Type)
		}
		w.cols[i] = c
		w.input = append(w.input, proto.InputColumn{Name: h.Name, Data: c.data()})
		w.order = append(w.order, i)
	}
	return w, nil
}

// insertCol is one column of a block INSERT: a ch-go column and the Go
// values it takes, a slice of them (AppendColumns) or one (AppendRow).
type insertCol interface {
	data() proto.ColInput
	appendSlice(v any) error
	appendValue(v any) error
	reset()
}

// typed is an insertCol of ch-go column c, taking []T and T; check, when
// set, refuses a value before it is appended.
type typed[T any] struct {
	c     proto.ColumnOf[T]
	check func(T) error
}

func (t typed[T]) data() proto.ColInput { return t.c }
func (t typed[T]) reset()               { t.c.Reset() }
func (t typed[T]) appendSlice(v any) error {
	s, ok := v.([]T)
	if !ok {
		return fmt.Errorf("cannot append %T", v)
	}
	if t.check != nil {
		for _, x := range s {
			if err := t.check(x); err != nil {
				return err
			}
		}
	}
	switch c := any(t.c).(type) {
	case *proto.ColStr:
		growStr(c, any(s).([]string))
	case *proto.ColArr[string]:
		growStrArr(c, any(s).([][]string))
	case *proto.ColArr[uint64]:
		growArr(c, any(s).([][]uint64))
	}
	t.c.AppendArr(s)
	return nil
}

// growStrArr is growStr for an Array(String) column: its offsets, and the
// strings of every array, made room for at once. The findings and the
// notification list carry arrays of tens of thousands of request keys per
// row at incident scale.
func growStrArr(c *proto.ColArr[string], s [][]string) {
	c.Offsets = roomFor(c.Offsets, len(s))
	if str, ok := c.Data.(*proto.ColStr); ok {
		n, b := 0, 0
		for _, a := range s {
			n += len(a)
			b += strBytes(a)
		}
		strRoom(str, n, b)
	}
}

// growArr is growStrArr for an Array(UInt64) column (evidence line ids).
func growArr(c *proto.ColArr[uint64], s [][]uint64) {
	c.Offsets = roomFor(c.Offsets, len(s))
	data, ok := c.Data.(*proto.ColUInt64)
	if !ok {
		return
	}
	n := 0
	for _, a := range s {
		n += len(a)
	}
	*data = roomFor(*data, n)
}

// growStr makes room in c for s (roomFor): ch-go appends string by
// string, so a findings INSERT's evidence column (tens of
// megabytes, one writer per INSERT) was copied to fresh arrays dozens of
// times (the reconstruction's saves at incident-2026 scale 20).
func growStr(c *proto.ColStr, s []string) { strRoom(c, len(s), strBytes(s)) }

// strRoom makes room in c for n more strings of b bytes in all.
func strRoom(c *proto.ColStr, n, b int) {
	c.Buf = roomFor(c.Buf, b)
	c.Pos = roomFor(c.Pos, n)
}

func strBytes(s []string) int {
	b := 0
	for _, x := range s {
		b += len(x)
	}
	return b
}

func (t typed[T]) appendValue(v any) error {
	x, ok := v.(T)
	if !ok {
		return fmt.Errorf("cannot append %T", v)
	}
	if t.check != nil {
		if err := t.check(x); err != nil {
			return err
		}
	}
	t.c.Append(x)
	return nil
}

// inDateTime refuses a time outside DateTime's range, as the driver does,
// where ch-go would wrap it around 2^32 seconds. The zero time is stored as
// 0, as ch-go stores it.
func inDateTime(t time.Time) error {
	if u := t.Unix(); !t.IsZero() && (u < 0 || u > math.MaxUint32) {
		return fmt.Errorf("%s is outside DateTime's range", t.Format(time.RFC3339))
	}
	return nil
}

// newInsertCol is the column for a type the server declared, nil for one
// kvtrail's schema does not use.
func newInsertCol(typ string) insertCol {
	switch typ {
	case "String":
		return typed[string]{c: new(proto.ColStr)}
	case "LowCardinality(String)":
		return typed[string]{c: proto.NewLowCardinality[string](new(proto.ColStr))}
	case "DateTime":
		return typed[time.Time]{new(proto.ColDateTime), inDateTime}
	case "UInt8":
		return typed[uint8]{c: new(proto.ColUInt8)}
	case "UInt16":
		return typed[uint16]{c: new(proto.ColUInt16)}
	case "UInt32":
		return typed[uint32]{c: new(proto.ColUInt32)}
	case "UInt64":
		return typed[uint64]{c: new(proto.ColUInt64)}
	case "Int16":
		return typed[int16]{c: new(proto.ColInt16)}
	case "Int32":
		return typed[int32]{c: new(proto.ColInt32)}
	case "Int64":
		return typed[int64]{c: new(proto.ColInt64)}
	case "Float64":
		return typed[float64]{c: new(proto.ColFloat64)}
	case "Array(String)":
		return typed[[]string]{c: proto.NewArray[string](new(proto.ColStr))}
	case "Array(UInt32)":
		return typed[[]uint32]{c: proto.NewArray[uint32](new(proto.ColUInt32))}
	case "Array(UInt64)":
		return typed[[]uint64]{c: proto.NewArray[uint64](new(proto.ColUInt64))}
	}
	return nil
}

func (w *blockWriter) AppendColumns(cols ...any) error {
	if len(cols) != len(w.cols) {
		return fmt.Errorf("chstore: %d column slices for an insert of %d columns", len(cols), len(w.cols))
	}
	for i, v := range cols {
		if err := w.cols[i].appendSlice(v); err != nil {
			return fmt.Errorf("column %s (%s): %w", w.names[i], w.cols[i].data().Type(), err)
		}
	}
	return w.settle()
}

func (w *blockWriter) AppendRow(vals ...any) error {
	if len(vals) != len(w.cols) {
		return fmt.Errorf("chstore: %d values for an insert of %d columns", len(vals), len(w.cols))
	}
	for i, v := range vals {
		if err := w.cols[i].appendValue(v); err != nil {
			return fmt.Errorf("column %s (%s): %w", w.names[i], w.cols[i].data().Type(), err)
		}
	}
	return w.settle()
}

// settle checks every column has the same rows after an append.
func (w *blockWriter) settle() error {
	n := w.cols[0].data().Rows()
	for i, c := range w.cols[1:] {
		if r := c.data().Rows(); r != n {
			return fmt.Errorf("chstore: column %s has %d rows, %s %d", w.names[i+1], r, w.names[0], n)
		}
	}
	w.rows = n
	return nil
}

func (w *blockWriter) Rows() int { return w.rows }

func (w *blockWriter) Flush() error {
	if w.rows == 0 {
		return nil
	}
	if err := w.in.Write(w.rows, w.input); err != nil {
		return asDriverError(err)
	}
	for _, c := range w.cols {
		c.reset()
	}
	w.rows = 0
	return nil
}

func (w *blockWriter) Send() error {
	if err := w.Flush(); err != nil {
		return err
	}
	return asDriverError(w.in.Close())
}

func (w *blockWriter) Abort() error {
	w.in.Abort()
	return nil
}

// asDriverError gives a server exception the driver's type, which callers
// branch on (IsCode, retryable) whichever path the statement took.
func asDriverError(err error) error {
	var ex *chblock.Exception
	if errors.As(err, &ex) {
		return &clickhouse.Exception{Code: int32(ex.Code), Name: ex.Name, Message: ex.Message}
	}
	return err
}

// SendColumns sends cols (a slice per column, in the writer's column
// order) as the INSERT's last block and ends it, as AppendColumns then
// Send. The Array(String) and Array(UInt64) columns are encoded from
// cols where they are (strArrays, u64Arrays), not copied into ch-go's
// columns first: they are all in hand and sent at once. At incident scale
// the notification list's arrays (868,775 request keys, 1.3M finding ids
// and 2.7M evidence lines in 48 rows at scale 100) took 120 MiB of ch-go
// columns beside the list that held them already.
func (w *blockWriter) SendColumns(cols ...any) error {
	if w.rows > 0 {
		return errors.New("chstore: SendColumns after rows were appended")
	}
	if len(cols) != len(w.cols) {
		return fmt.Errorf("chstore: %d column slices for an insert of %d columns", len(cols), len(w.cols))
	}
	input := slices.Clone(w.input)
	rows := -1
	for j, i := range w.order {
		var view proto.ColInput
		switch v := cols[i].(type) {
		case [][]string:
			if w.input[j].Data.Type() == "Array(String)" {
				view = strArrays(v)
			}
		case [][]uint64:
			if w.input[j].Data.Type() == "Array(UInt64)" {
				view = u64Arrays(v)
			}
		}
		if view == nil {
			if err := w.cols[i].appendSlice(cols[i]); err != nil {
				return fmt.Errorf("column %s (%s): %w", w.names[i], w.cols[i].data().Type(), err)
			}
			view = w.cols[i].data()
		}
		input[j].Data = view
		if rows >= 0 && view.Rows() != rows {
			return fmt.Errorf("chstore: column %s has %d rows, %s %d", w.names[i], view.Rows(), input[0].Name, rows)
		}
		rows = view.Rows()
	}
	if rows > 0 {
		if err := w.in.Write(rows, input); err != nil {
			return asDriverError(err)
		}
	}
	for _, c := range w.cols {
		c.reset()
	}
	return asDriverError(w.in.Close())
}

// arrays is an Array(String) or Array(UInt64) column of the caller's
// arrays, encoded as ch-go's ColArr encodes: the rows' end offsets, then
// every element (put, at most size bytes each).
type arrays[T any] struct {
	typ  proto.ColumnType
	v    [][]T
	put  func(*proto.Buffer, T)
	size func(T) int
}

func strArrays(v [][]string) arrays[string] {
	return arrays[string]{"Array(String)", v, (*proto.Buffer).PutString, func(s string) int { return 5 + len(s) }}
}

func u64Arrays(v [][]uint64) arrays[uint64] {
	return arrays[uint64]{"Array(UInt64)", v, (*proto.Buffer).PutUInt64, func(uint64) int { return 8 }}
}

func (a arrays[T]) Type() proto.ColumnType { return a.typ }
func (a arrays[T]) Rows() int              { return len(a.v) }
func (a arrays[T]) EncodeColumn(b *proto.Buffer) {
	var n uint64
	for _, x := range a.v {
		n += uint64(len(x))
		b.PutUInt64(n)
	}
	for _, x := range a.v {
		for _, e := range x {
			a.put(b, e)
		}
	}
}
func (a arrays[T]) WriteColumn(w *proto.Writer) { w.ChainBuffer(a.EncodeColumn) }

// EncodedSize is about what EncodeColumn appends, for chblock to make
// room for.
func (a arrays[T]) EncodedSize() int {
	n := 8 * len(a.v)
	for _, x := range a.v {
		for _, e := range x {
			n += a.size(e)
		}
	}
	return n
}
