package chstore

import (
	"context"
	"strings"

	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ClickHouse/clickhouse-go/v2"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// Migration is one embedded, numbered schema change.
type Migration struct {
	Version  uint32
	Name     string // file name, e.g. 0001_schema.sql
	Checksum string // sha256 of the file bytes
	Source   string
}

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// LoadMigrations reads NNNN_name.sql files from fsys, ordered by version.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	seen := map[uint32]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %q: name must be NNNN_lower_snake.sql", e.Name())
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		if prev, dup := seen[uint32(v)]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", prev, e.Name(), v)
		}
		seen[uint32(v)] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		out = append(out, Migration{Version: uint32(v), Name: e.Name(), Checksum: hex.EncodeToString(sum[:]), Source: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// MigrationStatus is one row of `kvtrail migrate status`.
type MigrationStatus struct {
	Version   uint32
	Name      string
	Applied   bool
	AppliedAt time.Time
	AppliedBy string
	// Changed is set when the embedded file no longer matches the checksum
	// recorded when it was applied.
	Changed bool
	// Unknown is set for a version recorded in the database that this
	// binary does not embed (the database is newer than kvtrail).
	Unknown bool
}

// Migrator applies migrations to a store's database.
type Migrator struct {
	store      *Store
	migrations []Migration
	layout     Layout
	owner      string
	// LockWait bounds how long Up waits for another process's lock.
	LockWait time.Duration
	// LockStale is the age after which a lock left by a dead process is broken.
	LockStale time.Duration
}

// NewMigrator prepares to apply migrations from fsys to the store's database.
func NewMigrator(s *Store, fsys fs.FS) (*Migrator, error) {
	ms, err := LoadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &Migrator{
		store:      s,
		migrations: ms,
		layout:     s.Layout(),
		owner:      fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()),
		LockWait:   2 * time.Minute,
		LockStale:  10 * time.Minute,
	}, nil
}

// ErrChanged is returned when an applied migration's file was edited.
var ErrChanged = errors.New("applied migration changed")

const (
	migrationsTable = "schema_migrations"
	lockTable       = "schema_migrations_lock"
)

// applied is one recorded migration. The query's aliases differ from the
// column names on purpose: an alias equal to a column shadows it everywhere
// in the query (docs/clickhouse.md).
type applied struct {
	Version   uint32    `ch:"v"`
	Name      string    `ch:"last_name"`
	Checksum  string    `ch:"last_checksum"`
	AppliedAt time.Time `ch:"first_applied"`
	AppliedBy string    `ch:"first_by"`
}

func (m *Migrator) ensureTable(ctx context.Context) error {
	// Checked first: in cluster mode the CREATE is ON CLUSTER, which waits
	// for every host, and must not be sent while a replica is down once
	// the table exists.
	var n uint64
	if err := m.store.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?",
		m.store.Database(), migrationsTable).Scan(&n); err != nil {
		return fmt.Errorf("look for %s: %w", migrationsTable, err)
	}
	if n > 0 {
		return nil
	}
	// The bookkeeping table lives outside the numbered migrations because
	// they need it to exist. Replacing on version: a record written twice
	// (a crash between DDL and record, then a rerun) folds into one.
	//
	// In cluster mode every host holds a replica of one table: the
	// ZooKeeper path has no shard in it and the replica name is
	// shard-replica, so all hosts form one replication group and each can
	// answer "what is applied" from its own copy.
	engine := "ReplacingMergeTree"
	onCluster := ""
	if l := m.layout; l.Cluster != "" {
		engine = fmt.Sprintf("ReplicatedReplacingMergeTree('/clickhouse/tables/all/%s/%s', '{%s}-{%s}')",
			l.Database, migrationsTable, l.shardMacro(), l.replicaMacro())
		onCluster = " ON CLUSTER " + l.Cluster
	}
	q := "CREATE TABLE IF NOT EXISTS " + m.store.Database() + "." + migrationsTable + onCluster + ` (
    version     UInt32,
    name        String,
    checksum    String,
    applied_at  DateTime,
    applied_by  String,
    duration_ms UInt64
) ENGINE = ` + engine + ` ORDER BY version`
	if err := m.store.ExecDDL(ctx, q); err != nil {
		return fmt.Errorf("create %s: %w", migrationsTable, err)
	}
	return nil
}

func (m *Migrator) applied(ctx context.Context) (map[uint32]applied, error) {
	var rows []applied
	q := `SELECT version AS v, argMax(name, applied_at) AS last_name, argMax(checksum, applied_at) AS last_checksum,
       min(applied_at) AS first_applied, argMin(applied_by, applied_at) AS first_by
FROM ` + m.store.Database() + "." + migrationsTable + `
GROUP BY version
ORDER BY version`
	if err := m.store.Select(ctx, &rows, q); err != nil {
		return nil, fmt.Errorf("read %s: %w", migrationsTable, err)
	}
	out := make(map[uint32]applied, len(rows))
	for _, r := range rows {
		out[r.Version] = r
	}
	return out, nil
}

// Status lists every known and recorded migration.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	if err := m.ensureTable(ctx); err != nil {
		return nil, err
	}
	done, err := m.applied(ctx)
	if err != nil {
		return nil, err
	}
	var out []MigrationStatus
	for _, mg := range m.migrations {
		st := MigrationStatus{Version: mg.Version, Name: mg.Name}
		if a, ok := done[mg.Version]; ok {
			st.Applied, st.AppliedAt, st.AppliedBy = true, a.AppliedAt, a.AppliedBy
			st.Changed = a.Checksum != mg.Checksum
			delete(done, mg.Version)
		}
		out = append(out, st)
	}
	for _, a := range done {
		out = append(out, MigrationStatus{Version: a.Version, Name: a.Name, Applied: true, AppliedAt: a.AppliedAt, AppliedBy: a.AppliedBy, Unknown: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Up applies every pending migration and returns the ones it applied. It is
// safe to run from several processes at once: they serialise on a lock
// table, and whoever comes second finds nothing left to do.
func (m *Migrator) Up(ctx context.Context) ([]Migration, error) {
	if err := m.ensureTable(ctx); err != nil {
		return nil, err
	}
	// Up to date (the common case: every serve and ingest starts with
	// Up): no lock, no DDL, so a cluster with a replica down still starts.
	done, err := m.applied(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.verify(done); err != nil {
		return nil, err
	}
	if m.pending(done) == 0 {
		return nil, nil
	}
	release, err := m.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()

	if done, err = m.applied(ctx); err != nil {
		return nil, err
	}
	if err := m.verify(done); err != nil {
		return nil, err
	}
	recCtx, err := m.recordContext(ctx)
	if err != nil {
		return nil, err
	}
	var ran []Migration
	for _, mg := range m.migrations {
		if _, ok := done[mg.Version]; ok {
			continue
		}
		start := time.Now()
		stmts, err := Render(mg.Source, m.layout)
		if err != nil {
			return ran, fmt.Errorf("migration %s: %w", mg.Name, err)
		}
		for i, stmt := range stmts {
			// Every statement is idempotent (IF NOT EXISTS, or guarded by a
			// system.columns check), so a crash mid-migration is repaired
			// by running it again.
			exec := func(ctx context.Context, stmt string) error { return m.store.ExecDDL(ctx, stmt) }
			err := resendIdempotent(ctx, exec, stmt, func(why string, err error) {
				slog.Warn(why, "migration", mg.Name, "statement", i+1, "err", err)
			})
			if err != nil {
				if duplicateColumn(stmt, err) {
					// 18.16 has no ADD COLUMN IF NOT EXISTS: a re-run of
					// an interrupted ALTER finds its column already there.
					continue
				}
				return ran, fmt.Errorf("migration %s statement %d: %w", mg.Name, i+1, err)
			}
		}
		rec := "INSERT INTO " + m.store.Database() + "." + migrationsTable +
			" (version, name, checksum, applied_at, applied_by, duration_ms) SELECT ?, ?, ?, now(), ?, ?"
		if err := m.store.Exec(recCtx, rec, mg.Version, mg.Name, mg.Checksum, m.owner, uint64(time.Since(start).Milliseconds())); err != nil {
			return ran, fmt.Errorf("record migration %s: %w", mg.Name, err)
		}
		ran = append(ran, mg)
	}
	return ran, nil
}

// recordContext makes, in cluster mode, the insert of a migration record
// wait until every host's replica of schema_migrations has it
// (insert_quorum = number of hosts): a kvtrail that starts right after a
// migrate, connected to another host, must not see the migration as
// pending. Migrating needs every host up anyway.
func (m *Migrator) recordContext(ctx context.Context) (context.Context, error) {
	if m.layout.Cluster == "" {
		return ctx, nil
	}
	hosts, err := m.store.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	return WithSettings(ctx, clickhouse.Settings{"insert_quorum": len(hosts)}), nil
}

func (m *Migrator) pending(done map[uint32]applied) int {
	n := 0
	for _, mg := range m.migrations {
		if _, ok := done[mg.Version]; !ok {
			n++
		}
	}
	return n
}

func (m *Migrator) verify(done map[uint32]applied) error {
	known := map[uint32]Migration{}
	for _, mg := range m.migrations {
		known[mg.Version] = mg
	}
	var errs []error
	for v, a := range done {
		mg, ok := known[v]
		if !ok {
			errs = append(errs, fmt.Errorf("database %s has migration %04d (%s) that this kvtrail does not know: upgrade kvtrail", m.store.Database(), v, a.Name))
			continue
		}
		if mg.Checksum != a.Checksum {
			errs = append(errs, fmt.Errorf("%w: %s was applied with checksum %s but the file now has %s; restore the file and put the change in a new migration",
				ErrChanged, mg.Name, short(a.Checksum), short(mg.Checksum)))
		}
	}
	return errors.Join(errs...)
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// lock takes the migration lock. ClickHouse has no transactions, but
// CREATE TABLE without IF NOT EXISTS is atomic: exactly one concurrent
// creator succeeds, the others get "table already exists".
//
// In cluster mode the lock table is created on one designated host, the
// first of system.clusters (shard 1, replica 1), whichever host this
// kvtrail is connected to: every kvtrail instance then contends for the
// same table. A replicated table cannot serve as a lock (inserts are not
// compare-and-set) and ON CLUSTER creation reports per-host results that
// do not name one winner. Migrating needs every host up anyway (ON CLUSTER
// DDL waits for all of them), so depending on the designated host costs no
// availability.
func (m *Migrator) lock(ctx context.Context) (func(), error) {
	if m.layout.Cluster == "" {
		return m.lockOn(ctx, m.store)
	}
	hosts, err := m.store.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := m.store.OpenHost(ctx, hosts[0], 0)
	if err != nil {
		return nil, fmt.Errorf("migration lock lives on %s, which must be up to migrate: %w", hosts[0], err)
	}
	release, err := m.lockOn(ctx, ls)
	if err != nil {
		_ = ls.Close()
		return nil, err
	}
	return func() { release(); _ = ls.Close() }, nil
}

func (m *Migrator) lockOn(ctx context.Context, s *Store) (func(), error) {
	table := s.Database() + "." + lockTable
	create := "CREATE TABLE " + table + " (owner String, acquired_at DateTime) ENGINE = TinyLog"
	deadline := time.Now().Add(m.LockWait)
	for {
		err := s.Exec(ctx, create)
		if err == nil {
			if err := s.Exec(ctx, "INSERT INTO "+table+" (owner, acquired_at) SELECT ?, now()", m.owner); err != nil {
				_ = s.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table)
				return nil, fmt.Errorf("record migration lock owner: %w", err)
			}
			return func() { _ = s.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table) }, nil
		}
		if !IsCode(err, CodeTableAlreadyExists) {
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		if stale, holder := m.lockIsStale(ctx, s); stale {
			// The holder died without releasing: break the lock.
			if err := s.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
				return nil, fmt.Errorf("break stale migration lock held by %s: %w", holder, err)
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("migration lock %s is held by another kvtrail; gave up after %s (it is broken automatically once older than %s)", table, m.LockWait, m.LockStale)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *Migrator) lockIsStale(ctx context.Context, s *Store) (bool, string) {
	var created time.Time
	q := "SELECT metadata_modification_time FROM system.tables WHERE database = ? AND name = ?"
	if err := s.QueryRow(ctx, q, s.Database(), lockTable).Scan(&created); err != nil {
		return false, ""
	}
	var holder string
	_ = s.QueryRow(ctx, "SELECT any(owner) FROM "+s.Database()+"."+lockTable).Scan(&holder)
	return time.Since(created) > m.LockStale, holder
}

// HostState is one cluster host's view of the schema, for
// `kvtrail migrate status` in cluster mode.
type HostState struct {
	Host
	// Err is set when kvtrail could not reach the host or read its state.
	Err error
	// Applied lists the versions in the host's replica of schema_migrations.
	Applied []uint32
	// Missing lists tables the applied migrations create that the host
	// lacks (an ON CLUSTER statement that did not reach it).
	Missing []string
	// ReadOnly counts the host's replicated kvtrail tables that are read-only
	// (ZooKeeper unreachable from that host).
	ReadOnly uint64
	// Queue is the host's replication queue length over kvtrail tables.
	Queue uint64
}

var createdTable = regexp.MustCompile(`(?m)^CREATE TABLE IF NOT EXISTS [A-Za-z0-9_]+\.([A-Za-z0-9_]+)`)

// HostStatus reads each cluster host's schema state directly from that
// host, in parallel. It returns nil on a single server.
func (m *Migrator) HostStatus(ctx context.Context) ([]HostState, error) {
	if m.layout.Cluster == "" {
		return nil, nil
	}
	hosts, err := m.store.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	tablesOf := map[uint32][]string{}
	for _, mg := range m.migrations {
		stmts, err := Render(mg.Source, m.layout)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", mg.Name, err)
		}
		for _, st := range stmts {
			if sm := createdTable.FindStringSubmatch(st); sm != nil {
				tablesOf[mg.Version] = append(tablesOf[mg.Version], sm[1])
			}
		}
	}
	out := make([]HostState, len(hosts))
	done := make(chan struct{}, len(hosts))
	for i, h := range hosts {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = m.hostState(ctx, h, tablesOf)
		}()
	}
	for range hosts {
		<-done
	}
	return out, nil
}

func (m *Migrator) hostState(ctx context.Context, h Host, tablesOf map[uint32][]string) HostState {
	st := HostState{Host: h}
	hs, err := m.store.OpenHost(ctx, h, 2*time.Second)
	if err != nil {
		st.Err = err
		return st
	}
	defer hs.Close()
	db := m.store.Database()
	present := map[string]bool{}
	rows, err := hs.Query(ctx, "SELECT name FROM system.tables WHERE database = ?", db)
	if err != nil {
		st.Err = err
		return st
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err == nil {
			present[name] = true
		}
	}
	rows.Close()
	if present[migrationsTable] {
		var versions []applied
		q := "SELECT version AS v, any(name) AS last_name, any(checksum) AS last_checksum, min(applied_at) AS first_applied, any(applied_by) AS first_by FROM " +
			db + "." + migrationsTable + " GROUP BY version ORDER BY version"
		if err := hs.Select(ctx, &versions, q); err != nil {
			st.Err = err
			return st
		}
		for _, v := range versions {
			st.Applied = append(st.Applied, v.Version)
			for _, t := range tablesOf[v.Version] {
				if !present[t] {
					st.Missing = append(st.Missing, t)
				}
			}
		}
	} else {
		st.Missing = append(st.Missing, migrationsTable)
	}
	q := "SELECT toUInt64(countIf(is_readonly = 1)), toUInt64(sum(queue_size)) FROM system.replicas WHERE database = ?"
	if err := hs.QueryRow(ctx, q, db).Scan(&st.ReadOnly, &st.Queue); err != nil {
		st.Err = err
	}
	return st
}

// clusterDDLRetries is how many more times a migration's ON CLUSTER
// statement is sent after its wait ended at the server's
// distributed_ddl_task_timeout (180 s by default) because a host had not
// run it: a host that is slow, restarting, or whose DDL worker ended
// (ClickHouse before 20.x stops it on an unexpected ZooKeeper error until
// the server restarts; the test cluster restarts such a host). The host
// runs the queued statement once it is back, and the statement asked
// again answers then. Only migrations resend: their statements are
// idempotent, which other ON CLUSTER statements (a findings update) need
// not be.
const clusterDDLRetries = 2

// shardLockRetries bounds how often a migration's ON CLUSTER statement
// is sent again after a host gave up on its shard's lock, shardLockWait
// the wait before each (4 × 10 s, beside the server's own 10 s or so of
// tries each time). In ClickHouse 18.16 (DDLWorker::processTaskAlter,
// dbms/src/Interpreters/DDLWorker.cpp, ClickHouse/ClickHouse at 86af5fc0;
// later versions were not checked) one replica of a shard runs an ALTER
// of a replicated table for the shard, under a ZooKeeper lock the other
// replicas try 20 times, up to a second apart, and then answer
// NOT_IMPLEMENTED "Cannot enqueue replicated DDL query for a replicated
// shard". The holder can outlast that: its ALTER waits for every active
// replica, and a replica restarted within the ZooKeeper session timeout
// (30 s) is read-only until its old session expires. CI saw this once,
// after the test cluster restarted a host whose DDL worker had ended.
const shardLockRetries = 4

var shardLockWait = 10 * time.Second

// migrateReconnects bounds how often a migration statement is sent again
// after the connection running it failed, reconnectWait the first wait
// (doubled each time, 31 s in all): a restarted server answers again
// within seconds. Reads retry on a new connection at once (retryable);
// a migration waits, because the server it needs may be the one that is
// restarting. Only migrations do this: their statements are idempotent.
const migrateReconnects = 5

var reconnectWait = time.Second

// resendIdempotent runs an idempotent statement (every migration
// statement is: IF NOT EXISTS, or guarded by a system.columns check) and
// sends it again, within the bounds above, while it fails in a way a
// resend can mend: an ON CLUSTER wait that ran out, a shard lock a host
// gave up on, a connection that failed. Each kind keeps its own count, so
// a resend that fails another way (the restarted host refuses the
// connection, then is read-only) still gets that kind's tries. warn is
// told each resend and why.
func resendIdempotent(ctx context.Context, exec func(context.Context, string) error, stmt string, warn func(why string, err error)) error {
	err := exec(ctx, stmt)
	var timeouts, locks, reconnects int
	for err != nil {
		var why string
		var wait time.Duration
		switch {
		case clusterDDLTimedOut(stmt, err) && timeouts < clusterDDLRetries:
			// A host has not run it yet and will in the background:
			// asked again, the hosts run it after what they have queued,
			// so the answer comes once the slow host caught up, and the
			// statement is idempotent where it ran.
			why = "an ON CLUSTER migration statement outlasted distributed_ddl_task_timeout; asking again, to wait for the slow host"
			timeouts++
		case shardLockBusy(stmt, err) && locks < shardLockRetries:
			// Another replica of the shard held its lock; asked again, the
			// shard runs the statement once that replica is done (or its
			// old session expired), and it is idempotent where it ran.
			why = "a host gave up waiting for its shard's lock on an ON CLUSTER migration statement; asking again"
			wait = shardLockWait
			locks++
		case retryable(ctx, err) && reconnects < migrateReconnects:
			// The connection, not the server's answer, failed: the server
			// went down or restarted while it ran the statement (on 18.16
			// a host whose DDL worker died is restarted). Sent again once
			// the server is back; it is idempotent whether or not it ran.
			why = "the connection running a migration statement failed; sending it again"
			wait = reconnectWait << reconnects
			reconnects++
		default:
			return err
		}
		warn(why, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		err = exec(ctx, stmt)
	}
	return nil
}

// clusterDDLTimedOut reports whether err ended an ON CLUSTER statement's
// wait for a host that still runs it.
func clusterDDLTimedOut(stmt string, err error) bool {
	return err != nil && IsCode(err, CodeTimeoutExceeded) && onCluster(stmt)
}

// shardLockBusy reports whether a host answered an ON CLUSTER statement
// that it could not take its shard's lock in time (see shardLockRetries).
// The code alone is not enough: NOT_IMPLEMENTED also answers statements
// a server cannot run at all, which a resend would not mend.
func shardLockBusy(stmt string, err error) bool {
	return err != nil && IsCode(err, CodeNotImplemented) && onCluster(stmt) &&
		strings.Contains(err.Error(), "Cannot enqueue replicated DDL query")
}

func onCluster(stmt string) bool { return strings.Contains(strings.ToUpper(stmt), " ON CLUSTER ") }

// duplicateColumn reports an ALTER ... ADD COLUMN that failed because the
// column exists (ClickHouse error 44 ILLEGAL_COLUMN / 15 DUPLICATE_COLUMN).
func duplicateColumn(stmt string, err error) bool {
	up := strings.ToUpper(stmt)
	if !strings.HasPrefix(strings.TrimSpace(up), "ALTER TABLE") || !strings.Contains(up, "ADD COLUMN") {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "already exists") || strings.Contains(msg, "DUPLICATE_COLUMN")
}
