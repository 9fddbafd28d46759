// Package chstore is kvtrail's access to ClickHouse: one connection pool over
// the native protocol (the HTTP protocol of clickhouse-go fails against
// 18.16), the schema migrator, and the rules every statement follows so it
// runs on 18.16 and on modern servers alike (docs/clickhouse.md).
package chstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/sqlcapture"
)

// Options says where the server is and which database kvtrail owns.
type Options struct {
	Addrs        []string
	Database     string
	Username     string
	Password     string
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	MaxOpenConns int
	// OnStatement, when set, sees the text of every statement before it is
	// sent. Tests use it to check each one against the modern grammar.
	OnStatement func(sql string)
	// OnResult, when set, sees every statement once the server has
	// answered it: its text, its arguments, the tables sent with it (the
	// lists of lists.go) and the error (nil when the server accepted it;
	// for a batch insert, when it accepted the INSERT). Tests record the
	// accepted ones to replay them on a modern engine (internal/chdbtier).
	OnResult func(sql string, args []any, tables []sqlcapture.Table, err error)
	// Cluster, when set, is the ClickHouse cluster (remote_servers name)
	// the schema is deployed on: cluster mode (docs/cluster.md).
	Cluster string
	// ShardMacro and ReplicaMacro name the servers' macros that the
	// Replicated engines' paths use (default "shard" and "replica").
	ShardMacro, ReplicaMacro string
	// InsertQuorum, in cluster mode, is sent as insert_quorum: an insert is
	// acknowledged only once that many replicas of each shard hold it. 0
	// (the default) acknowledges after one replica, so a down replica does
	// not stop ingest (docs/cluster.md).
	InsertQuorum int
	// RowReads reads the analysis's large scans row by row through the
	// driver instead of a block at a time (blocks.go). Tests set it to
	// hold both paths to the same result.
	RowReads bool
	// DriverInserts writes every INSERT through the driver instead of the
	// block path (block_insert.go). Tests set it to hold both paths to the
	// same rows.
	DriverInserts bool
	// Compression of data blocks on the wire: "lz4", "none", or "auto"
	// (the default): none when every address is a loopback one, where LZ4
	// only costs CPU on both ends, lz4 otherwise.
	Compression string
}

// compression resolves Options.Compression for addrs.
func compression(mode string, addrs []string) (*clickhouse.Compression, error) {
	switch mode {
	case "lz4":
		return &clickhouse.Compression{Method: clickhouse.CompressionLZ4}, nil
	case "none":
		return &clickhouse.Compression{Method: clickhouse.CompressionNone}, nil
	case "", "auto":
		for _, a := range addrs {
			host, _, err := net.SplitHostPort(a)
			if err != nil {
				host = a
			}
			ip := net.ParseIP(host)
			if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return &clickhouse.Compression{Method: clickhouse.CompressionLZ4}, nil
			}
		}
		return &clickhouse.Compression{Method: clickhouse.CompressionNone}, nil
	}
	return nil, fmt.Errorf("chstore: compression %q: want auto, lz4 or none", mode)
}

// Conn is what Store needs of its connection: the subset of clickhouse-go's
// driver.Conn that kvtrail uses. The native driver's pool satisfies it, and
// so does the embedded engine (internal/chdbstore), so every Store method
// runs unchanged on either.
type Conn interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) driver.Row
	Select(ctx context.Context, dest any, query string, args ...any) error
	Exec(ctx context.Context, query string, args ...any) error
	PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error)
	Ping(ctx context.Context) error
	Close() error
}

var _ Conn = driver.Conn(nil)

// Store is a connection pool bound to one database.
type Store struct {
	conn    Conn
	db      string
	version Version
	hook    func(string)
	result  func(string, []any, []sqlcapture.Table, error)
	opts    Options
	blocks  *blockReader // nil: rows only (blocks.go)
}

// Version is the server's version, used to gate version-specific SQL.
type Version struct {
	Major, Minor, Patch uint64
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Legacy reports a server older than 19.x: it needs
// allow_experimental_low_cardinality_type for LowCardinality DDL and lacks
// CODEC, TTL, skip indexes and more (docs/clickhouse.md).
func (v Version) Legacy() bool { return v.Major < 19 }

// Open connects, creates the database if needed and returns a Store bound to it.
func Open(ctx context.Context, o Options) (*Store, error) {
	if len(o.Addrs) == 0 {
		return nil, errors.New("chstore: no ClickHouse address")
	}
	// Connect to "default" first: the native handshake fails when the
	// requested database does not exist yet.
	boot, err := dial(ctx, o, "default")
	if err != nil {
		return nil, err
	}
	if o.Cluster != "" {
		err = boot.createClusterDatabase(ctx, o.Database)
	} else {
		boot.see("CREATE DATABASE IF NOT EXISTS " + o.Database)
		err = boot.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(o.Database))
	}
	_ = boot.conn.Close()
	if err != nil {
		return nil, fmt.Errorf("chstore: create database %s on %s: %w", o.Database, strings.Join(o.Addrs, ","), err)
	}
	if o.Cluster != "" && len(o.Addrs) > 0 {
		o.Addrs = firstReplicasFirst(ctx, o)
	}
	s, err := dial(ctx, o, o.Database)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenConn returns a Store over conn, an open connection already bound to
// database o.Database of a server of version v: the embedded engine
// (clickhouse.engine: embedded). Only Database, OnStatement and OnResult of
// o apply; it is a single-server store. Closing the Store closes conn.
func OpenConn(conn Conn, v Version, o Options) (*Store, error) {
	if o.Database == "" {
		return nil, errors.New("chstore: no database")
	}
	if o.Cluster != "" {
		return nil, errors.New("chstore: an embedded engine has no cluster")
	}
	if o.MaxOpenConns <= 0 {
		// Callers size their parallel use by it (ingest keeps an INSERT
		// open per table). An open batch holds no connection here, only
		// its buffered rows, so a pool's default size serves.
		o.MaxOpenConns = 16
	}
	return &Store{conn: conn, db: o.Database, version: v, hook: o.OnStatement, result: o.OnResult, opts: o}, nil
}

func dial(ctx context.Context, o Options, db string) (*Store, error) {
	var settings clickhouse.Settings
	if o.Cluster != "" {
		// Inserts go through the Distributed tables. On 18.16 they are
		// asynchronous by default: acknowledged once queued on the
		// initiator's disk. Synchronous, an insert returns only when every
		// shard's replica has the rows (docs/cluster.md has the timings).
		// The Distributed engine ignores it on reads, so it is sent with
		// every statement: clickhouse-go has no per-INSERT default.
		//
		// prefer_localhost_replica=0: the connected server treats its own
		// shard like the others. 18.16's local-shard path fails
		// "SELECT cols FROM dist FINAL ORDER BY ..." when a sorting-key
		// column is not selected (Cannot find column ... in source stream);
		// and with load_balancing=in_order (docs/cluster.md) every kvtrail,
		// whichever host it is connected to, reads and writes the same
		// first live replica of each shard, so it reads what it wrote.
		settings = clickhouse.Settings{"insert_distributed_sync": 1, "prefer_localhost_replica": 0}
		if o.InsertQuorum > 1 {
			settings["insert_quorum"] = o.InsertQuorum
		}
	}
	if o.OnResult == nil && o.Cluster == "" && sqlcapture.Enabled() {
		// A test run records what the server accepted for the replay on
		// ClickHouse 26.7 (scripts/test.sh); this covers the kvtrail
		// processes that CLI tests start. Cluster-mode statements (ON
		// CLUSTER, Distributed) are not recorded: the replay engine is one
		// host without a cluster.
		source := "process " + filepath.Base(os.Args[0])
		o.OnResult = func(sql string, args []any, tables []sqlcapture.Table, err error) {
			if err == nil {
				_ = sqlcapture.Record(source, db, sql, args, tables...)
			}
		}
	}
	comp, err := compression(o.Compression, o.Addrs)
	if err != nil {
		return nil, err
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Settings: settings,
		Protocol: clickhouse.Native,
		Addr:     o.Addrs,
		Auth: clickhouse.Auth{
			Database: db,
			Username: o.Username,
			Password: o.Password,
		},
		Compression:     comp,
		DialTimeout:     o.DialTimeout,
		ReadTimeout:     o.ReadTimeout,
		MaxOpenConns:    o.MaxOpenConns,
		MaxIdleConns:    max(1, o.MaxOpenConns/2),
		ConnMaxLifetime: time.Hour,
		// Pooled connections otherwise keep the encode and compression
		// buffers of their largest insert (measured: ~150 MB after a
		// bulk ingest); kvtrail's big inserts are few, so freeing them
		// costs little and bounds memory.
		FreeBufOnConnRelease: true,
	})
	if err != nil {
		return nil, fmt.Errorf("chstore: open %s: %w", strings.Join(o.Addrs, ","), err)
	}
	if err := conn.Ping(ctx); err != nil {
		_ = conn.Close()
		// Unreachable is "try again later", not a bug: the CLI exits 4 and
		// the API answers 503 (domain kinds).
		return nil, domain.E(domain.Unavailable, fmt.Errorf("chstore: ping %s: %w", strings.Join(o.Addrs, ","), err))
	}
	sv, err := conn.ServerVersion()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("chstore: server version: %w", err)
	}
	return &Store{
		conn: conn,
		db:   db,
		version: Version{
			Major: sv.Version.Major,
			Minor: sv.Version.Minor,
			Patch: sv.Version.Patch,
		},
		hook:   o.OnStatement,
		result: o.OnResult,
		opts:   o,
		blocks: newBlockReader(o, db, comp, settings),
	}, nil
}

// Database is the database the store is bound to.
func (s *Store) Database() string { return s.db }

// MaxOpenConns is the size of the connection pool: a caller that holds
// connections for long (ingest keeps an INSERT open per table) sizes its
// use by it.
func (s *Store) MaxOpenConns() int { return s.opts.MaxOpenConns }

// Cluster is the cluster the schema is deployed on ("" for a single server).
func (s *Store) Cluster() string { return s.opts.Cluster }

// Layout is how migrations render for this store.
func (s *Store) Layout() Layout {
	return Layout{Database: s.db, Cluster: s.opts.Cluster, Version: s.version,
		ShardMacro: s.opts.ShardMacro, ReplicaMacro: s.opts.ReplicaMacro}
}

// ServerVersion is the version the server reported at connect time.
func (s *Store) ServerVersion() Version { return s.version }

// Ping checks the server answers.
func (s *Store) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// Close releases the pool.
func (s *Store) Close() error { return s.conn.Close() }

func (s *Store) see(sql string) {
	if s.hook != nil {
		s.hook(sql)
	}
}

func (s *Store) answered(sql string, args []any, err error) {
	s.answeredWith(sql, args, nil, err)
}

// answeredWith is answered for a statement sent with lists.
func (s *Store) answeredWith(sql string, args []any, lists []list, err error) {
	if s.result != nil {
		s.result(sql, args, capturedTables(lists), err)
	}
}

// Exec runs a statement that returns no rows. Never use it for
// INSERT ... VALUES: 18.16 hangs on that over the native protocol; use
// PrepareBatch, or INSERT ... SELECT for a single row.
func (s *Store) Exec(ctx context.Context, sql string, args ...any) error {
	s.see(sql)
	err := s.conn.Exec(ctx, sql, args...)
	s.answered(sql, args, err)
	return err
}

// Reads are retried when the connection, not the server, failed: a pooled
// connection to a host that has gone down fails once, the pool drops it,
// and the next attempt dials the next address (in cluster mode, another
// replica). A server exception or a cancelled context is not retried.
const readAttempts = 3

func retryable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var ex *clickhouse.Exception
	return !errors.As(err, &ex) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func backoff(ctx context.Context, attempt int) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(attempt*attempt) * 100 * time.Millisecond):
		return true
	}
}

// Query runs a query; the caller closes the rows.
func (s *Store) Query(ctx context.Context, sql string, args ...any) (driver.Rows, error) {
	s.see(sql)
	lists := listsOf(ctx)
	rows, err := s.queryConn(ctx, lists, sql, args...)
	for attempt := 1; attempt < readAttempts && retryable(ctx, err) && backoff(ctx, attempt); attempt++ {
		rows, err = s.queryConn(ctx, lists, sql, args...)
	}
	s.answeredWith(sql, args, lists, err)
	return rows, err
}

// streamTimeout bounds a read whose rows the caller handles as they
// arrive (the Scan* reads). clickhouse-go sets its read timeout once per
// query, not per packet (startReadWriteTimeout in processImpl), so
// clickhouse.read_timeout (60 s) would bound the whole stream, including
// the caller's own time per row: at 5M requests a replay's stream failed
// with "i/o timeout". A context deadline replaces the read timeout for that
// query; a caller's earlier deadline still wins.
const streamTimeout = 30 * time.Minute

// Stream runs a query whose rows the caller reads as they arrive, under
// streamTimeout instead of the read timeout. The caller closes the rows and
// then calls done.
func (s *Store) Stream(ctx context.Context, sql string, args ...any) (rows driver.Rows, done context.CancelFunc, err error) {
	ctx, done = context.WithTimeout(ctx, streamTimeout)
	rows, err = s.Query(ctx, sql, args...)
	if err != nil {
		done()
		return nil, func() {}, err
	}
	return rows, done, nil
}

// QueryRow runs a query that returns one row.
func (s *Store) QueryRow(ctx context.Context, sql string, args ...any) driver.Row {
	s.see(sql)
	row := s.conn.QueryRow(ctx, sql, args...)
	for attempt := 1; attempt < readAttempts && retryable(ctx, row.Err()) && backoff(ctx, attempt); attempt++ {
		row = s.conn.QueryRow(ctx, sql, args...)
	}
	s.answered(sql, args, row.Err())
	return row
}

// Select scans all rows into dest, a pointer to a slice of structs with ch tags.
func (s *Store) Select(ctx context.Context, dest any, sql string, args ...any) error {
	s.see(sql)
	// A read that fails part-way has appended rows: trim them before retrying.
	v := reflect.ValueOf(dest)
	n := -1
	if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Slice {
		n = v.Elem().Len()
	}
	err := s.conn.Select(ctx, dest, sql, args...)
	for attempt := 1; attempt < readAttempts && n >= 0 && retryable(ctx, err) && backoff(ctx, attempt); attempt++ {
		v.Elem().SetLen(n)
		err = s.conn.Select(ctx, dest, sql, args...)
	}
	s.answered(sql, args, err)
	return err
}

// PrepareBatch starts a batch insert. The statement must name its columns:
// against 18.16 a column-less INSERT learns zero columns from the server.
func (s *Store) PrepareBatch(ctx context.Context, insert string) (driver.Batch, error) {
	s.see(insert)
	if !strings.Contains(insert, "(") {
		return nil, fmt.Errorf("chstore: insert without a column list: %q", insert)
	}
	b, err := s.conn.PrepareBatch(ctx, insert)
	s.answered(insert, nil, err)
	return b, err
}

// ddlTimeout bounds one DDL statement in place of clickhouse.read_timeout.
// An ON CLUSTER statement answers only when every host has run it, or when
// the server's distributed_ddl_task_timeout (180 s by default) ends the
// wait with an error naming the hosts that did not; on a loaded 2-core CI
// machine one ALTER of a replicated table took more than the 60 s read
// timeout, and the client's bare "i/o timeout" hid which host was slow.
// ddlTimeout leaves the server's own answer time to arrive.
const ddlTimeout = 5 * time.Minute

// ExecDDL runs one DDL statement (or an ON CLUSTER mutation) with the settings DDL needs on this
// server version, under ddlTimeout instead of the read timeout (an earlier
// deadline of the caller's still wins).
func (s *Store) ExecDDL(ctx context.Context, sql string, args ...any) error {
	ctx, cancel := s.ddlContext(ctx)
	defer cancel()
	return s.Exec(ctx, sql, args...)
}

func (s *Store) ddlContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.version.Legacy() {
		// Obsolete (and ignored) on modern servers; required on 18.16.
		ctx = WithSettings(ctx, clickhouse.Settings{"allow_experimental_low_cardinality_type": 1})
	}
	return context.WithTimeout(ctx, ddlTimeout)
}

type settingsKey struct{}

// WithSettings returns ctx with settings added to those ctx already sends
// with each statement. clickhouse-go's own WithSettings replaces them:
// the DDL context (allow_experimental_low_cardinality_type on 18.16)
// dropped whatever settings its caller had set.
func WithSettings(ctx context.Context, add clickhouse.Settings) context.Context {
	prev, _ := ctx.Value(settingsKey{}).(clickhouse.Settings)
	merged := make(clickhouse.Settings, len(prev)+len(add))
	maps.Copy(merged, prev)
	maps.Copy(merged, add)
	return clickhouse.Context(context.WithValue(ctx, settingsKey{}, merged), clickhouse.WithSettings(merged))
}

// IsCode reports whether err is a server exception with the given code.
func IsCode(err error, code int32) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == code
}

// Server error codes kvtrail branches on.
const (
	// CodeNotImplemented is also what a replica of a shard answers when it
	// gave up on the shard's lock for an ON CLUSTER ALTER (18.16; see
	// shardLockRetries).
	CodeNotImplemented     int32 = 48
	CodeTableAlreadyExists int32 = 57
	CodeUnknownTable       int32 = 60
	// CodeTimeoutExceeded is also what an ON CLUSTER statement answers when
	// a host has not run it within distributed_ddl_task_timeout.
	CodeTimeoutExceeded int32 = 159
)

// quoteIdent backquotes an identifier. Database names are validated by
// config.Validate; this is a second line of defence.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}
