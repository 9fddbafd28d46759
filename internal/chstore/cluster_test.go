package chstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/sqlcapture"
	"github.com/kvtrail/kvtrail/internal/sqlcheck"
	"github.com/kvtrail/kvtrail/internal/testcluster"
	"github.com/kvtrail/kvtrail/migrations"
)

func clusterStore(t *testing.T, c *testcluster.Cluster, addrs []string) *chstore.Store {
	t.Helper()
	s, err := openClusterStore(t, c, addrs)
	if err != nil {
		t.Fatalf("open cluster store: %v", err)
	}
	return s
}

// openClusterStore is clusterStore for goroutines other than the test's
// own, where t.Fatal would end the goroutine without a result and leave
// the test waiting for it.
func openClusterStore(t *testing.T, c *testcluster.Cluster, addrs []string) (*chstore.Store, error) {
	return openClusterDB(t, c, "kvt", addrs)
}

func openClusterDB(t *testing.T, c *testcluster.Cluster, db string, addrs []string) (*chstore.Store, error) {
	s, err := chstore.Open(context.Background(), chstore.Options{
		Addrs: addrs, Database: db, Username: "default", Cluster: c.Name,
		DialTimeout: 2 * time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 4,
		OnStatement: func(sql string) {
			if err := sqlcheck.Check(sql); err != nil {
				t.Errorf("statement fails the modern grammar: %v", err)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, nil
}

// Migrations apply ON CLUSTER from any host, concurrently, exactly once;
// every host then reports the same state and a row inserted through a
// Distributed table folds with its re-insert on its shard.
func TestClusterMigrateAndStatus(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	ctx := context.Background()
	errs := make(chan error, 2)
	for _, addr := range []string{c.Node(1, 1).Addr, c.Node(2, 2).Addr} {
		go func() {
			s, err := openClusterStore(t, c, []string{addr})
			if err != nil {
				errs <- fmt.Errorf("open store on %s: %w", addr, err)
				return
			}
			m, err := chstore.NewMigrator(s, migrations.FS)
			if err == nil {
				// The second migrator waits out the first one's whole
				// schema ON CLUSTER: on the CI machine, beside the other
				// packages' tests, that once took longer than the default
				// 2-minute wait (2026-12-05), and this test is about
				// exactly-once, not about how long a user waits.
				m.LockWait = m.LockStale
				_, err = m.Up(ctx)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent cluster migrate: %v", err)
		}
	}
	s := clusterStore(t, c, c.Addrs())
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := m.HostStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 4 {
		t.Fatalf("%d hosts, want 4", len(hs))
	}
	want := len(embedded(t))
	for _, h := range hs {
		if h.Err != nil || len(h.Applied) != want || len(h.Missing) != 0 || h.ReadOnly != 0 {
			t.Errorf("%s: applied %v missing %v readonly %d err %v", h.Host, h.Applied, h.Missing, h.ReadOnly, h.Err)
		}
	}
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM schema_migrations FINAL").Scan(&n); err != nil || n != uint64(want) {
		t.Fatalf("schema_migrations rows = %d (%v), want %d", n, err, want)
	}

	for range 2 {
		b, err := s.PrepareBatch(ctx, "INSERT INTO engine_events (ts, ts_ns, node, role, event, rid, bootstrap_room, line_id)")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if err := b.Append(time.Unix(1780000000, 0), uint64(i), "decode-1", "decode", "received", "r", uint64(i*7919), uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatalf("insert through Distributed: %v", err)
		}
	}
	if err := s.QueryRow(ctx, "SELECT count() FROM engine_events FINAL").Scan(&n); err != nil || n != 100 {
		t.Fatalf("engine_events FINAL = %d (%v), want 100", n, err)
	}
	// The analysis's block reads go through the Distributed tables with
	// the cluster's settings, and read what the driver reads.
	scan := func(st *chstore.Store) []domain.EngineEvent {
		var out []domain.EngineEvent
		at := time.Unix(1780000000, 0)
		if err := st.ScanEngineEvents(ctx, at, at, func(e *domain.EngineEvent) error {
			out = append(out, *e)
			return nil
		}); err != nil {
			t.Fatalf("scan engine events on the cluster: %v", err)
		}
		return out
	}
	blocks := scan(s)
	if len(blocks) != 100 || !chstore.ReadsBlocks(s) {
		t.Fatalf("block read on the cluster: %d lines (want 100), still reading blocks: %v", len(blocks), chstore.ReadsBlocks(s))
	}
	rows, err := chstore.Open(ctx, chstore.Options{Addrs: c.Addrs(), Database: "kvt", Username: "default", Cluster: c.Name,
		DialTimeout: 2 * time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 2, RowReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if got := scan(rows); !reflect.DeepEqual(got, blocks) {
		t.Fatalf("the driver read %d lines on the cluster, the block path %d, or they differ", len(got), len(blocks))
	}

	// A store that lists a later replica first still reads at once what it
	// wrote. On 18.16 a synchronous Distributed insert writes the connected
	// host's own shard to that host, and the reads go to each shard's first
	// replica: connected to shard 2's second replica, a read right after
	// each insert missed the rows of shard 2 until the first replica had
	// fetched them (worker b of TestClusterIngestWorkersEqualSingleServer,
	// listing that replica first, once stored an empty notification list).
	later := clusterStore(t, c, []string{c.Node(2, 2).Addr, c.Node(1, 2).Addr, c.Node(2, 1).Addr, c.Node(1, 1).Addr})
	readsWhatItWrote(t, later, "decode-2", 10)

	migrationOutlastsADownHost(t, c)

	down, err := s.PingShards(ctx)
	if err != nil || len(down) != 0 {
		t.Fatalf("PingShards = %v, %v", down, err)
	}
	// Shard 1's first replica down: a store listing it first connects to
	// shard 2's first replica, writes and reads of shard 1 both fail over
	// to its second replica, and it still reads at once what it wrote.
	c.Node(1, 1).Stop()
	failover := clusterStore(t, c, c.Addrs())
	readsWhatItWrote(t, failover, "failover", 20)
	down, err = failover.PingShards(ctx)
	if err != nil || len(down) != 1 {
		t.Fatalf("one replica down: PingShards = %v, %v", down, err)
	}
	c.Node(1, 2).Stop()
	if _, err = failover.PingShards(ctx); err == nil {
		t.Fatal("shard 1 down: PingShards reported ready")
	}
}

// readsWhatItWrote inserts rounds of 100 engine lines of node through s
// and reads each round back at once.
func readsWhatItWrote(t *testing.T, s *chstore.Store, node string, rounds int) {
	t.Helper()
	ctx := context.Background()
	for round := range rounds {
		at := time.Unix(1780000100+int64(round), 0)
		b, err := s.PrepareBatch(ctx, "INSERT INTO engine_events (ts, ts_ns, node, role, event, rid, bootstrap_room, line_id)")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if err := b.Append(at, uint64(i), node, "decode", "received", "r", uint64(i*7919), uint64(1000+round*100+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatalf("insert through Distributed: %v", err)
		}
		var n uint64
		if err := s.QueryRow(ctx, "SELECT count() FROM engine_events WHERE node = ? AND ts = ?", node, at).Scan(&n); err != nil || n != 100 {
			t.Fatalf("%s, round %d: read %d of the 100 rows just written (%v)", node, round, n, err)
		}
	}
}

// migrationOutlastsADownHost: a migration's ON CLUSTER statement whose
// wait ends at distributed_ddl_task_timeout, a host being down, is asked
// again (clusterDDLRetries); once the host is back it has run the
// statement, and the migration is recorded as applied. The timeout is
// shortened for the test; the servers' default is 180 s.
func migrationOutlastsADownHost(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	var timedOut atomic.Int32 // statements of migration b whose wait ended at the timeout
	first := make(chan struct{})
	s, err := chstore.Open(ctx, chstore.Options{
		Addrs: []string{c.Node(1, 1).Addr}, Database: "kvt_ddl_retry", Username: "default", Cluster: c.Name,
		DialTimeout: 2 * time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 4,
		OnResult: func(sql string, _ []any, _ []sqlcapture.Table, err error) {
			if strings.Contains(sql, ".b") && chstore.IsCode(err, chstore.CodeTimeoutExceeded) && timedOut.Add(1) == 1 {
				close(first)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one := fstest.MapFS{"0001_a.sql": {Data: []byte(`CREATE TABLE IF NOT EXISTS {{table "a"}} {{on_cluster}} (x UInt8) ENGINE = Memory;`)}}
	m, err := chstore.NewMigrator(s, one)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("first migration, every host up: %v", err)
	}
	two := fstest.MapFS{"0001_a.sql": one["0001_a.sql"],
		"0002_b.sql": {Data: []byte(`CREATE TABLE IF NOT EXISTS {{table "b"}} {{on_cluster}} (x UInt8) ENGINE = Memory;`)}}
	if m, err = chstore.NewMigrator(s, two); err != nil {
		t.Fatal(err)
	}
	// 18.16 ended each wait after about half the timeout sent (its error
	// names half the value): the host is started again once the first
	// wait has ended, and the next two waits have the rest.
	const timeout = 20 * time.Second
	late := c.Node(2, 2)
	late.Stop()
	back := make(chan error, 1)
	go func() {
		select {
		case <-first:
		case <-time.After(3 * timeout):
		}
		back <- late.Start(ctx)
	}()
	start := time.Now()
	ran, err := m.Up(chstore.WithSettings(ctx, clickhouse.Settings{"distributed_ddl_task_timeout": int(timeout / time.Second)}))
	took := time.Since(start)
	if berr := <-back; berr != nil {
		t.Fatalf("restart %s: %v", late, berr)
	}
	if err != nil || len(ran) != 1 {
		t.Fatalf("second migration with %s down for %s: ran %d, %v", late, timeout, len(ran), err)
	}
	if timedOut.Load() == 0 {
		t.Fatalf("the migration took %s and no wait ended at the DDL timeout: nothing was asked again", took)
	}
	on, err := openClusterDB(t, c, "kvt_ddl_retry", []string{late.Addr})
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := on.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'kvt_ddl_retry' AND name LIKE 'b%'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s has %d tables b after the migration (%v), want 1", late, n, err)
	}
	t.Logf("a migration statement outlasted a %s DDL timeout %d time(s) with %s down and was applied in %s", timeout,
		timedOut.Load(), late, took)
}
