package chstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
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
		layout:     Layout{Database: s.Database(), Version: s.ServerVersion()},
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
	// The bookkeeping table lives outside the numbered migrations because
	// they need it to exist. Replacing on version: a record written twice
	// (a crash between DDL and record, then a rerun) folds into one.
	q := "CREATE TABLE IF NOT EXISTS " + m.store.Database() + "." + migrationsTable + ` (
    version     UInt32,
    name        String,
    checksum    String,
    applied_at  DateTime,
    applied_by  String,
    duration_ms UInt64
) ENGINE = ReplacingMergeTree ORDER BY version`
	if err := m.store.Exec(ctx, q); err != nil {
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
	release, err := m.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()

	done, err := m.applied(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.verify(done); err != nil {
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
			if err := m.store.Exec(m.store.DDLContext(ctx), stmt); err != nil {
				return ran, fmt.Errorf("migration %s statement %d: %w", mg.Name, i+1, err)
			}
		}
		rec := "INSERT INTO " + m.store.Database() + "." + migrationsTable +
			" (version, name, checksum, applied_at, applied_by, duration_ms) SELECT ?, ?, ?, now(), ?, ?"
		if err := m.store.Exec(ctx, rec, mg.Version, mg.Name, mg.Checksum, m.owner, uint64(time.Since(start).Milliseconds())); err != nil {
			return ran, fmt.Errorf("record migration %s: %w", mg.Name, err)
		}
		ran = append(ran, mg)
	}
	return ran, nil
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
func (m *Migrator) lock(ctx context.Context) (func(), error) {
	table := m.store.Database() + "." + lockTable
	create := "CREATE TABLE " + table + " (owner String, acquired_at DateTime) ENGINE = TinyLog"
	deadline := time.Now().Add(m.LockWait)
	for {
		err := m.store.Exec(ctx, create)
		if err == nil {
			if err := m.store.Exec(ctx, "INSERT INTO "+table+" (owner, acquired_at) SELECT ?, now()", m.owner); err != nil {
				_ = m.store.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table)
				return nil, fmt.Errorf("record migration lock owner: %w", err)
			}
			return func() { _ = m.store.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table) }, nil
		}
		if !IsCode(err, CodeTableAlreadyExists) {
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		if stale, holder := m.lockIsStale(ctx); stale {
			// The holder died without releasing: break the lock.
			if err := m.store.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
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

func (m *Migrator) lockIsStale(ctx context.Context) (bool, string) {
	var created time.Time
	q := "SELECT metadata_modification_time FROM system.tables WHERE database = ? AND name = ?"
	if err := m.store.QueryRow(ctx, q, m.store.Database(), lockTable).Scan(&created); err != nil {
		return false, ""
	}
	var holder string
	_ = m.store.QueryRow(ctx, "SELECT any(owner) FROM "+m.store.Database()+"."+lockTable).Scan(&holder)
	return time.Since(created) > m.LockStale, holder
}
