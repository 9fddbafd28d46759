package chstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func newMigrator(t *testing.T, s *chstore.Store, fsys fstest.MapFS) *chstore.Migrator {
	t.Helper()
	var m *chstore.Migrator
	var err error
	if fsys == nil {
		m, err = chstore.NewMigrator(s, migrations.FS)
	} else {
		m, err = chstore.NewMigrator(s, fsys)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func embedded(t *testing.T) []chstore.Migration {
	t.Helper()
	ms, err := chstore.LoadMigrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no embedded migrations")
	}
	return ms
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	ctx := context.Background()
	s := testdb.Empty(t)
	m := newMigrator(t, s, nil)
	ran, err := m.Up(ctx)
	if err != nil {
		t.Fatalf("first Up: %v", err)
	}
	if want := len(embedded(t)); len(ran) != want {
		t.Fatalf("first Up applied %d migrations, want %d", len(ran), want)
	}
	ran, err = m.Up(ctx)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if len(ran) != 0 {
		t.Fatalf("second Up applied %d migrations, want 0", len(ran))
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range st {
		if !row.Applied || row.Changed || row.Unknown {
			t.Errorf("status %+v: want applied and unchanged", row)
		}
	}
	// The schema is really there: every table of the product exists.
	for _, table := range []string{"raw_lines", "nodes", "node_boots", "engine_events", "batch_stats", "transfer_events",
		"gateway_responses", "metric_samples", "metric_series", "line_sources", "page_events", "request_facts", "analyzer_runs", "findings",
		"affected", "cases", "case_evidence", "exports", "ingest_sources", "audit_log", "id_index", "replay_parts"} {
		var n uint64
		if err := s.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", s.Database(), table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s missing after migrate", table)
		}
	}
}

// A migration statement whose connection fails (the server going down or
// restarting under it) is sent again once the server answers: the
// migration completes. On the test cluster a replica whose 18.16 DDL
// worker died was restarted under a concurrent migrate, which failed with
// "read: EOF" (2026-12-07).
func TestMigrateSurvivesAConnectionReset(t *testing.T) {
	ctx := context.Background()
	s, proxy := storeThroughProxy(t)
	// The first migration's first statement creates raw_lines; nothing
	// the migrator sends before it names the table.
	proxy.match = []byte("raw_lines")
	proxy.armed.Store(true)
	ran, err := newMigrator(t, s, nil).Up(ctx)
	if err != nil {
		t.Fatalf("Up across a reset: %v", err)
	}
	if got := proxy.resets.Load(); got != 1 {
		t.Fatalf("proxy reset %d connections, want 1 (the test did not exercise the failure)", got)
	}
	if want := len(embedded(t)); len(ran) != want {
		t.Fatalf("Up applied %d migrations, want %d", len(ran), want)
	}
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'raw_lines'", s.Database()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("raw_lines after Up: %d (%v)", n, err)
	}
}

func TestConcurrentMigrateAppliesOnce(t *testing.T) {
	ctx := context.Background()
	opts := testdb.Options(t)
	const procs = 3
	stores := make([]*chstore.Store, procs)
	for i := range stores {
		s, err := chstore.Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	var wg sync.WaitGroup
	total := make([]int, procs)
	errs := make([]error, procs)
	for i := range stores {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := newMigrator(t, stores[i], nil)
			ran, err := m.Up(ctx)
			total[i], errs[i] = len(ran), err
		}(i)
	}
	wg.Wait()
	sum := 0
	for i := range total {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		sum += total[i]
	}
	want := len(embedded(t))
	if sum != want {
		t.Fatalf("migrators applied %v migrations in total, want exactly %d", total, want)
	}
	var recorded uint64
	if err := stores[0].QueryRow(ctx, "SELECT count() FROM schema_migrations").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if int(recorded) != want {
		t.Fatalf("schema_migrations holds %d records, want %d (one per migration)", recorded, want)
	}
}

func TestTamperedMigrationRefused(t *testing.T) {
	ctx := context.Background()
	s := testdb.Empty(t)
	ms := embedded(t)
	orig := fstest.MapFS{}
	for _, m := range ms {
		orig[m.Name] = &fstest.MapFile{Data: []byte(m.Source)}
	}
	if _, err := newMigrator(t, s, orig).Up(ctx); err != nil {
		t.Fatal(err)
	}
	tampered := fstest.MapFS{}
	for k, v := range orig {
		tampered[k] = v
	}
	first := ms[0].Name
	tampered[first] = &fstest.MapFile{Data: []byte(ms[0].Source + "\n-- an innocent edit\n")}
	m := newMigrator(t, s, tampered)
	_, err := m.Up(ctx)
	if !errors.Is(err, chstore.ErrChanged) {
		t.Fatalf("Up with an edited applied migration: got %v, want ErrChanged", err)
	}
	if !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "new migration") {
		t.Errorf("error does not name the file and the fix: %v", err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st[0].Changed {
		t.Errorf("status does not flag %s as changed: %+v", first, st[0])
	}
}

func TestNewerDatabaseRefused(t *testing.T) {
	ctx := context.Background()
	s := testdb.Empty(t)
	ms := embedded(t)
	full := fstest.MapFS{}
	for _, m := range ms {
		full[m.Name] = &fstest.MapFile{Data: []byte(m.Source)}
	}
	full["9999_future.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE IF NOT EXISTS {{table \"future\"}} (x UInt8) ENGINE = {{engine \"future\" \"MergeTree\"}} ORDER BY x;\n")}
	if _, err := newMigrator(t, s, full).Up(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := newMigrator(t, s, nil).Up(ctx)
	if err == nil || !strings.Contains(err.Error(), "9999") || !strings.Contains(err.Error(), "upgrade kvtrail") {
		t.Fatalf("older binary on newer database: got %v", err)
	}
}

func TestMigrationLock(t *testing.T) {
	ctx := context.Background()
	s := testdb.Empty(t)
	if err := s.Exec(ctx, "CREATE TABLE schema_migrations_lock (owner String, acquired_at DateTime) ENGINE = TinyLog"); err != nil {
		t.Fatal(err)
	}
	m := newMigrator(t, s, nil)
	m.LockWait = 300 * time.Millisecond
	if _, err := m.Up(ctx); err == nil || !strings.Contains(err.Error(), "held by another kvtrail") {
		t.Fatalf("Up while another holds the lock: got %v", err)
	}
	// A lock older than LockStale was left by a dead process: broken.
	m.LockStale = 0
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("Up with a stale lock: %v", err)
	}
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'schema_migrations_lock'", s.Database()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("lock table left behind after Up")
	}
}
