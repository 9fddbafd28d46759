package chdbstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/kvtrail/kvtrail/internal/chbind"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

// Engine is the process's one chdb session (chdb allows one per process).
// Statements are serialised: the session has one current database.
type Engine struct {
	mu      sync.Mutex
	sess    *session
	cur     string
	dir     string
	seq     atomic.Int64
	version chstore.Version
	typesMu sync.Mutex
	types   map[string]map[string]string // db.table → column → type
}

var (
	engineMu sync.Mutex
	engine   *Engine
)

// OpenEngine opens the in-process engine with its data under dir. A second
// call returns the same engine (dir must then match).
func OpenEngine(dir string) (*Engine, error) {
	engineMu.Lock()
	defer engineMu.Unlock()
	if engine != nil {
		if engine.dir != dir {
			return nil, fmt.Errorf("chdbstore: engine already open on %s (one per process), not %s", engine.dir, dir)
		}
		return engine, nil
	}
	if chdbConnect == nil {
		// No library loaded yet (tests): the default one, found as
		// FindLibrary finds it.
		path, err := FindLibrary("")
		if err != nil {
			return nil, err
		}
		if err := LoadLibrary(path); err != nil {
			return nil, err
		}
	}
	for _, sub := range []string{"inserts", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("chdbstore: %w", err)
		}
	}
	sess, err := newSession(filepath.Join(dir, "data"))
	if err != nil {
		return nil, fmt.Errorf("chdbstore: open session in %s: %w", dir, err)
	}
	e := &Engine{sess: sess, dir: dir}
	// kvtrail's servers run in UTC, and bound times are written without a
	// zone (the driver's binder): the session must agree.
	if _, err := e.raw(chstore.EngineSessionUTCSQL, "TabSeparated"); err != nil {
		sess.Close()
		return nil, err
	}
	out, err := e.raw(chstore.EngineVersionSQL, "TabSeparated")
	if err != nil {
		sess.Close()
		return nil, err
	}
	if e.version, err = parseVersion(strings.TrimSpace(string(out))); err != nil {
		sess.Close()
		return nil, err
	}
	engine = e
	return e, nil
}

// Version is the engine's ClickHouse version.
func (e *Engine) Version() chstore.Version { return e.version }

// Close ends the session.
func (e *Engine) Close() {
	engineMu.Lock()
	defer engineMu.Unlock()
	e.sess.Close()
	if engine == e {
		engine = nil
	}
}

func parseVersion(s string) (chstore.Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 3 {
		return chstore.Version{}, fmt.Errorf("chdbstore: version %q", s)
	}
	var n [3]uint64
	for i := range n {
		v, err := strconv.ParseUint(parts[i], 10, 64)
		if err != nil {
			return chstore.Version{}, fmt.Errorf("chdbstore: version %q: %w", s, err)
		}
		n[i] = v
	}
	return chstore.Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// raw runs one statement in the current database. The caller holds mu or
// owns the engine exclusively.
func (e *Engine) raw(sql, format string) ([]byte, error) {
	out, err := e.sess.query(sql, format)
	if err != nil {
		return nil, fmt.Errorf("chdb: %w\n%s", exception(err), clip(sql))
	}
	return out, nil
}

var codeRE = regexp.MustCompile(`^Code: (\d+)\. `)

// exception gives a server error the driver's type, so chstore.IsCode and
// chstore's retry rule (never retry what the server refused) hold for the
// embedded engine as for a server.
func exception(err error) error {
	msg := strings.TrimSpace(err.Error())
	m := codeRE.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	code, _ := strconv.ParseInt(m[1], 10, 32)
	return &clickhouse.Exception{Code: int32(code), Name: "DB::Exception", Message: msg}
}

// run runs sql with db as the current database.
func (e *Engine) run(db, sql, format string) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.use(db); err != nil {
		return nil, err
	}
	return e.raw(sql, format)
}

// use makes db the current database. The caller holds mu.
func (e *Engine) use(db string) error {
	if db == e.cur {
		return nil
	}
	if _, err := e.raw("USE "+quoteIdent(db), "TabSeparated"); err != nil {
		return err
	}
	e.cur = db
	return nil
}

// writeNative writes b as a Native file for an INSERT ... SELECT FROM
// file(), and returns its path and its columns quoted for the INSERT;
// the caller removes the file.
func (e *Engine) writeNative(b *proto.Block, what string) (path, cols string, err error) {
	var buf chproto.Buffer
	if err := b.Encode(&buf, 0); err != nil {
		return "", "", fmt.Errorf("chdbstore: encode block for %s: %w", what, err)
	}
	path = filepath.Join(e.dir, "inserts", fmt.Sprintf("%d-%d.native", os.Getpid(), e.seq.Add(1)))
	if err := os.WriteFile(path, buf.Buf, 0o600); err != nil {
		return "", "", fmt.Errorf("chdbstore: %w", err)
	}
	list := make([]string, len(b.Columns))
	for i, c := range b.Columns {
		list[i] = quoteIdent(c.Name())
	}
	return path, strings.Join(list, ", "), nil
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Store is a handle on one database of the engine, with the methods of
// chstore.Store that analyze and ingest use.
type Store struct {
	e  *Engine
	db string
	// OnStatement, when set, sees every bound statement before it runs.
	OnStatement func(sql string)
}

// Open creates database db if needed and returns a handle on it.
func (e *Engine) Open(db string) (*Store, error) {
	if _, err := e.run("default", chstore.EngineCreateDatabaseSQL(quoteIdent(db)), "TabSeparated"); err != nil {
		return nil, err
	}
	return &Store{e: e, db: db}, nil
}

// Database is the handle's database.
func (s *Store) Database() string { return s.db }

// Ping checks the engine answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.e.run(s.db, chstore.EnginePingSQL, "TabSeparated")
	return err
}

// Close releases the handle. The engine stays open: whoever opened it
// closes it (Engine.Close), once every handle is done.
func (s *Store) Close() error { return nil }

// Conn is the handle as a chstore.Conn, for chstore.OpenConn: a
// chstore.Store whose every method runs on the embedded engine.
func (s *Store) Conn() chstore.Conn { return conn{s} }

// conn adds the driver's PrepareBatch signature (its options, such as
// releasing the connection, have no meaning without a pool).
type conn struct{ *Store }

func (c conn) PrepareBatch(ctx context.Context, insert string, _ ...driver.PrepareBatchOption) (driver.Batch, error) {
	return c.Store.PrepareBatch(ctx, insert)
}

// Layout is how migrations render for this engine (single server).
func (s *Store) Layout() chstore.Layout {
	return chstore.Layout{Database: s.db, Version: s.e.version}
}

func (s *Store) bind(sql string, args []any) (string, error) {
	q, err := chbind.Bind(time.UTC, sql, args...)
	if err != nil {
		return "", fmt.Errorf("chdbstore: bind: %w", err)
	}
	if s.OnStatement != nil {
		s.OnStatement(q)
	}
	return q, nil
}

// Exec runs a statement that returns no rows.
func (s *Store) Exec(ctx context.Context, sql string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q, err := s.bind(sql, args)
	if err != nil {
		return err
	}
	if ddl.MatchString(q) {
		s.e.typesMu.Lock()
		s.e.types = nil
		s.e.typesMu.Unlock()
	}
	_, err = s.e.run(s.db, q, "TabSeparated")
	return err
}

var ddl = regexp.MustCompile(`(?i)^\s*(CREATE|DROP|ALTER|RENAME|ATTACH|DETACH)\b`)

// Query runs a query. The whole result is read before it returns (chdb
// hands results over in one buffer), so holding the rows open never
// blocks another statement.
func (s *Store) Query(ctx context.Context, sql string, args ...any) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := s.bind(sql, args)
	if err != nil {
		return nil, err
	}
	out, err := s.e.run(s.db, q, "Native")
	if err != nil {
		return nil, err
	}
	return decodeRows(out)
}

// QueryExternal runs a query with tables sent beside it, as a server takes
// the native protocol's external data (chstore.ExternalConn): each table
// is a temporary table of the session while the statement runs, loaded
// from a Native file as a batch is, and dropped after it.
func (s *Store) QueryExternal(ctx context.Context, tables []*ext.Table, sql string, args ...any) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := s.bind(sql, args)
	if err != nil {
		return nil, err
	}
	out, err := s.e.runWith(s.db, tables, q, "Native")
	if err != nil {
		return nil, err
	}
	return decodeRows(out)
}

// runWith is run with tables created for the statement and dropped after
// it, all under one hold of the session.
func (e *Engine) runWith(db string, tables []*ext.Table, sql, format string) (out []byte, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.use(db); err != nil {
		return nil, err
	}
	for _, t := range tables {
		name := quoteIdent(t.Name())
		if _, err := e.raw(chstore.EngineCreateTemporarySQL(name, t.Structure()), "TabSeparated"); err != nil {
			return nil, err
		}
		defer func() {
			if _, derr := e.raw(chstore.EngineDropTemporarySQL(name), "TabSeparated"); derr != nil && err == nil {
				out, err = nil, derr
			}
		}()
		if err := e.loadTable(name, t); err != nil {
			return nil, err
		}
	}
	return e.raw(sql, format)
}

// loadTable writes t's rows into the temporary table name. The caller
// holds mu.
func (e *Engine) loadTable(name string, t *ext.Table) error {
	if t.Block().Rows() == 0 {
		return nil
	}
	path, cols, err := e.writeNative(t.Block(), "table "+t.Name())
	if err != nil {
		return err
	}
	defer os.Remove(path)
	_, err = e.raw(chstore.EngineInsertFromFileSQL(name, cols, path, t.Structure()), "TabSeparated")
	return err
}

// QueryRow runs a query that returns one row.
func (s *Store) QueryRow(ctx context.Context, sql string, args ...any) driver.Row {
	r, err := s.Query(ctx, sql, args...)
	if err != nil {
		return &row{err: err}
	}
	return &row{rows: r.(*rows)}
}

// Select scans all rows into dest, a pointer to a slice of structs with ch
// tags.
func (s *Store) Select(ctx context.Context, dest any, sql string, args ...any) error {
	r, err := s.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(dest)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Slice {
		return errors.New("chdbstore: Select wants a pointer to a slice")
	}
	sl := v.Elem()
	sl.SetLen(0)
	for r.Next() {
		el := reflect.New(sl.Type().Elem())
		if err := r.ScanStruct(el.Interface()); err != nil {
			return err
		}
		sl.Set(reflect.Append(sl, el.Elem()))
	}
	return r.Err()
}

func decodeRows(buf []byte) (*rows, error) {
	r := &rows{}
	// The reader buffers: the end of the result is io.EOF from the
	// decoder, not an empty bytes.Reader.
	pr := chproto.NewReader(bytes.NewReader(buf))
	for {
		b := proto.NewBlock()
		b.ServerContext = &column.ServerContext{Timezone: time.UTC, VersionMajor: 26}
		if err := b.Decode(pr, 0); err != nil {
			if errors.Is(err, io.EOF) && b.Columns == nil {
				break
			}
			return nil, fmt.Errorf("chdbstore: decode Native result: %w", err)
		}
		if r.names == nil {
			r.names = b.ColumnsNames()
			r.types = b.Columns
		}
		if b.Rows() > 0 {
			r.blocks = append(r.blocks, b)
		}
	}
	return r, nil
}

// rows walks decoded Native blocks. Scanning goes through the driver's
// column code (ScanRow), so destinations convert as with a server.
type rows struct {
	blocks []*proto.Block
	names  []string
	types  []column.Interface
	bi     int
	row    int // 1-based within blocks[bi]; 0 before the first Next
	closed bool
}

func (r *rows) Next() bool {
	if r.closed {
		return false
	}
	for r.bi < len(r.blocks) {
		if r.row < r.blocks[r.bi].Rows() {
			r.row++
			return true
		}
		r.bi++
		r.row = 0
	}
	return false
}

func (r *rows) current() (*proto.Block, error) {
	if r.bi >= len(r.blocks) || r.row == 0 {
		return nil, errors.New("chdbstore: Scan called without a row (call Next first)")
	}
	return r.blocks[r.bi], nil
}

func (r *rows) Scan(dest ...any) error {
	b, err := r.current()
	if err != nil {
		return err
	}
	if len(dest) != len(b.Columns) {
		return fmt.Errorf("chdbstore: expected %d destination arguments in Scan, not %d", len(b.Columns), len(dest))
	}
	for i, d := range dest {
		if err := b.Columns[i].ScanRow(d, r.row-1); err != nil {
			return fmt.Errorf("chdbstore: scan column %s: %w", r.names[i], err)
		}
	}
	return nil
}

// ScanStruct fills the fields tagged ch:"name" (or named like the column).
func (r *rows) ScanStruct(dest any) error {
	b, err := r.current()
	if err != nil {
		return err
	}
	v := reflect.ValueOf(dest)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return errors.New("chdbstore: ScanStruct wants a pointer to a struct")
	}
	st := v.Elem()
	fields := map[string]int{}
	for i := 0; i < st.NumField(); i++ {
		f := st.Type().Field(i)
		name := f.Tag.Get("ch")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = i
	}
	for i, name := range r.names {
		fi, ok := fields[name]
		if !ok {
			return fmt.Errorf("chdbstore: ScanStruct: no field for column %s", name)
		}
		if err := b.Columns[i].ScanRow(st.Field(fi).Addr().Interface(), r.row-1); err != nil {
			return fmt.Errorf("chdbstore: scan column %s: %w", name, err)
		}
	}
	return nil
}

func (r *rows) ColumnTypes() []driver.ColumnType {
	out := make([]driver.ColumnType, len(r.types))
	for i, c := range r.types {
		out[i] = colType{c}
	}
	return out
}

func (r *rows) Totals(...any) error { return errors.New("chdbstore: WITH TOTALS is not supported") }
func (r *rows) Columns() []string   { return r.names }
func (r *rows) Close() error        { r.closed = true; return nil }
func (r *rows) Err() error          { return nil }
func (r *rows) HasData() bool       { return len(r.blocks) > 0 }

type colType struct{ c column.Interface }

func (t colType) Name() string { return t.c.Name() }
func (t colType) Nullable() bool {
	return strings.HasPrefix(string(t.c.Type()), "Nullable(")
}
func (t colType) ScanType() reflect.Type   { return t.c.ScanType() }
func (t colType) DatabaseTypeName() string { return string(t.c.Type()) }

type row struct {
	rows *rows
	err  error
}

func (r *row) Err() error { return r.err }

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if !r.rows.Next() {
		return sql.ErrNoRows
	}
	return r.rows.Scan(dest...)
}

func (r *row) ScanStruct(dest any) error {
	if r.err != nil {
		return r.err
	}
	if !r.rows.Next() {
		return sql.ErrNoRows
	}
	return r.rows.ScanStruct(dest)
}

var insertRE = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+([A-Za-z0-9_.]+)\s*\((.*)\)\s*$`)

// PrepareBatch starts a batch insert; like chstore's, the statement must
// name its columns.
func (s *Store) PrepareBatch(ctx context.Context, insert string) (driver.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.OnStatement != nil {
		s.OnStatement(insert)
	}
	m := insertRE.FindStringSubmatch(insert)
	if m == nil {
		return nil, fmt.Errorf("chdbstore: insert without a column list: %q", insert)
	}
	db, table := s.db, m[1]
	if d, t, ok := strings.Cut(table, "."); ok {
		db, table = d, t
	}
	var cols []string
	for _, c := range strings.Split(m[2], ",") {
		cols = append(cols, strings.Trim(strings.TrimSpace(c), "`"))
	}
	types, err := s.columnTypes(ctx, db, table)
	if err != nil {
		return nil, err
	}
	b := proto.NewBlock()
	b.ServerContext = &column.ServerContext{Timezone: time.UTC, VersionMajor: 26}
	for _, c := range cols {
		ct, ok := types[c]
		if !ok {
			return nil, fmt.Errorf("chdbstore: %s.%s has no column %s", db, table, c)
		}
		if err := b.AddColumn(c, column.Type(ct)); err != nil {
			return nil, fmt.Errorf("chdbstore: column %s %s: %w", c, ct, err)
		}
	}
	structure := make([]string, len(cols))
	for i, c := range cols {
		structure[i] = quoteIdent(c) + " " + types[c]
	}
	return &batch{s: s, target: quoteIdent(db) + "." + quoteIdent(table), block: b,
		structure: strings.Join(structure, ", ")}, nil
}

func (s *Store) columnTypes(ctx context.Context, db, table string) (map[string]string, error) {
	// Cached per engine: ingest prepares thousands of batches. Any DDL
	// sent through Exec clears the cache.
	key := db + "." + table
	s.e.typesMu.Lock()
	cached, ok := s.e.types[key]
	s.e.typesMu.Unlock()
	if ok {
		return cached, nil
	}
	r, err := s.Query(ctx, chstore.EngineColumnsSQL, db, table)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for r.Next() {
		var n, t string
		if err := r.Scan(&n, &t); err != nil {
			return nil, err
		}
		out[n] = t
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("chdbstore: no table %s.%s", db, table)
	}
	s.e.typesMu.Lock()
	if s.e.types == nil {
		s.e.types = map[string]map[string]string{}
	}
	s.e.types[key] = out
	s.e.typesMu.Unlock()
	return out, nil
}

// batch buffers rows in a driver block; Flush writes the block as a
// Native file and loads it with one INSERT ... SELECT FROM file().
type batch struct {
	s      *Store
	target string
	block  *proto.Block
	sent   bool
	// structure is the file's columns and types, given to file() so it
	// does not infer them for every block.
	structure string
}

func (b *batch) Abort() error                { b.sent = true; b.block.Reset(); return nil }
func (b *batch) Close() error                { b.sent = true; return nil }
func (b *batch) IsSent() bool                { return b.sent }
func (b *batch) Rows() int                   { return b.block.Rows() }
func (b *batch) Columns() []column.Interface { return b.block.Columns }
func (b *batch) Append(v ...any) error {
	if b.sent {
		return errors.New("chdbstore: batch already sent")
	}
	return b.block.Append(v...)
}

func (b *batch) AppendStruct(any) error {
	return errors.New("chdbstore: AppendStruct is not supported; use Append")
}

func (b *batch) Column(i int) driver.BatchColumn {
	if i < 0 || i >= len(b.block.Columns) {
		return badColumn{fmt.Errorf("chdbstore: column %d of %d", i, len(b.block.Columns))}
	}
	return batchColumn{b.block.Columns[i]}
}

func (b *batch) Flush() error {
	if b.block.Rows() == 0 {
		return nil
	}
	path, cols, err := b.s.e.writeNative(b.block, b.target)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	q := chstore.EngineInsertFromFileSQL(b.target, cols, path, b.structure)
	if _, err := b.s.e.run(b.s.db, q, "TabSeparated"); err != nil {
		return err
	}
	b.block.Reset()
	return nil
}

func (b *batch) Send() error {
	if b.sent {
		return errors.New("chdbstore: batch already sent")
	}
	err := b.Flush()
	b.sent = true
	return err
}

type batchColumn struct{ c column.Interface }

func (c batchColumn) Append(v any) error {
	_, err := c.c.Append(v)
	return err
}
func (c batchColumn) AppendRow(v any) error { return c.c.AppendRow(v) }

type badColumn struct{ err error }

func (c badColumn) Append(any) error    { return c.err }
func (c badColumn) AppendRow(any) error { return c.err }
