package chstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TableWriter is one open INSERT into one table, fed in native blocks:
// rows appended (column by column or row by row) are held by the client
// until Flush sends them as a block of the same INSERT; Send ends the
// INSERT, and only then are its rows stored. Abort drops it unsent.
//
// It is an alias of an unnamed interface so that consumers (ingest,
// promimport, probe) can declare the identical type themselves and name
// it in their own store interfaces without importing this package.
type TableWriter = interface {
	// AppendColumns appends one slice per column, in the order of the
	// columns the INSERT was opened with; all of the same length.
	AppendColumns(cols ...any) error
	// AppendRow appends one row, one value per column.
	AppendRow(vals ...any) error
	// Rows is how many rows are held, not yet flushed.
	Rows() int
	// Flush sends the held rows as one block of the open INSERT.
	Flush() error
	// Send ends the INSERT: every row appended is stored when it returns nil.
	Send() error
	// Abort drops the INSERT without storing what was not sent.
	Abort() error
}

// identRE is what a table or column name handed to OpenInsert may look
// like: the plain identifiers of kvtrail's schema, never an expression.
var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// OpenInsert opens one INSERT into table naming columns, in that order: the
// streaming writer behind ingest's one-INSERT-per-table commit windows and
// every bulk write of rows. The statement always names its columns (18.16
// learns zero columns from a column-less INSERT), so a column the caller
// does not name gets its default.
func (s IngestStatements) OpenInsert(ctx context.Context, table string, columns []string) (TableWriter, error) {
	sql, err := insertStatement(table, columns)
	if err != nil {
		return nil, err
	}
	b, err := s.c.PrepareBatch(ctx, sql)
	if err != nil {
		return nil, err
	}
	return &tableWriter{b: b}, nil
}

// insertStatement renders INSERT INTO table (columns).
func insertStatement(table string, columns []string) (string, error) {
	if !identRE.MatchString(table) {
		return "", fmt.Errorf("chstore: insert into %q: not a table name", table)
	}
	if len(columns) == 0 {
		return "", fmt.Errorf("chstore: insert into %s: no columns", table)
	}
	for _, c := range columns {
		if !identRE.MatchString(c) {
			return "", fmt.Errorf("chstore: insert into %s: %q is not a column name", table, c)
		}
	}
	return "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ")", nil
}

// tableWriter is a TableWriter over one driver batch.
type tableWriter struct {
	b driver.Batch
	// lowCard marks the columns of LowCardinality type, read once from
	// the server's column list.
	lowCard []bool
}

func (w *tableWriter) AppendColumns(cols ...any) error {
	if w.lowCard == nil {
		types := w.b.Columns()
		w.lowCard = make([]bool, len(types))
		for i, t := range types {
			w.lowCard[i] = strings.HasPrefix(string(t.Type()), "LowCardinality(")
		}
	}
	if len(cols) != len(w.lowCard) {
		return fmt.Errorf("chstore: %d column slices for an insert of %d columns", len(cols), len(w.lowCard))
	}
	for i, c := range cols {
		// String slices bound for LowCardinality columns are handed over
		// boxed: the driver appends those row by row through interfaces,
		// and boxing each distinct value once saves an allocation per row.
		if s, ok := c.([]string); ok && w.lowCard[i] {
			c = boxStrings(s)
		}
		if err := w.b.Column(i).Append(c); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

func (w *tableWriter) AppendRow(vals ...any) error { return w.b.Append(vals...) }
func (w *tableWriter) Rows() int                   { return w.b.Rows() }
func (w *tableWriter) Flush() error                { return w.b.Flush() }
func (w *tableWriter) Send() error                 { return w.b.Send() }
func (w *tableWriter) Abort() error                { return w.b.Abort() }

// boxStrings returns s as interfaces, sharing one box per distinct value.
func boxStrings(s []string) []any {
	out := make([]any, len(s))
	seen := map[string]any{}
	for i, v := range s {
		b, ok := seen[v]
		if !ok {
			b = v
			seen[v] = b
		}
		out[i] = b
	}
	return out
}
