//go:build chdb

package chdbtier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chdbstore"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

var eng *chdbstore.Engine

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvtrail-chdbtier-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eng, err = chdbstore.OpenEngine(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	eng.Close()
	_ = os.RemoveAll(dir)
	testdb.Shutdown()
	os.Exit(code)
}

// migrate applies every embedded migration, rendered for layout, to the
// store's database. Cluster layouts are reduced to what one host holds
// (localPart).
func migrate(t *testing.T, s *chdbstore.Store, layout chstore.Layout) int {
	t.Helper()
	ms, err := chstore.LoadMigrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		stmts, err := chstore.Render(m.Source, layout)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		for i, st := range stmts {
			if layout.Cluster != "" {
				var ok bool
				if st, ok = localPart(st); !ok {
					continue
				}
			}
			if err := s.Exec(context.Background(), st); err != nil {
				t.Errorf("%s statement %d fails on ClickHouse %s: %v", m.Name, i+1, eng.Version(), err)
				continue
			}
			n++
		}
	}
	return n
}

var (
	alterTable = regexp.MustCompile(`^ALTER TABLE ([A-Za-z0-9_.]+)`)
	onCluster  = regexp.MustCompile(` ON CLUSTER [A-Za-z0-9_]+`)
	replicated = regexp.MustCompile(`Replicated([A-Za-z]+)\('[^']*', '[^']*'(?:, )?`)
)

// localPart turns a cluster-layout statement into what it does on one
// host: no ON CLUSTER (the engine is one host, without a cluster
// definition), and Replicated engines without their ZooKeeper path and
// replica (it has no Keeper), so the local tables' columns, keys, settings
// and indexes run as rendered. The Distributed tables over them need a
// remote_servers cluster, so their CREATE and ALTER statements, and the
// backfills that INSERT through them, are left out
// (ok false).
// insertInto names the table a migration's INSERT ... SELECT writes.
var insertInto = regexp.MustCompile(`(?s)^\s*INSERT INTO\s+(?:\S+\.)?(\S+)\s`)

func localPart(st string) (string, bool) {
	if strings.Contains(st, "ENGINE = Distributed(") {
		return "", false
	}
	if m := alterTable.FindStringSubmatch(st); m != nil && !strings.HasSuffix(m[1], "_local") {
		return "", false // an ALTER of a Distributed table
	}
	if m := insertInto.FindStringSubmatch(st); m != nil && !strings.HasSuffix(m[1], "_local") {
		return "", false // a backfill through the Distributed tables
	}
	st = onCluster.ReplaceAllString(st, "")
	return replicated.ReplaceAllString(st, "$1("), true
}

// Every migration runs on ClickHouse 26.7 in both renderings (the portable
// one kvtrail uses on 18.16 and the modern one it uses on this version),
// in the single-server layout and in the cluster layout's local tables.
func TestMigrationsOnModernEngine(t *testing.T) {
	modern := eng.Version()
	if !modern.Modern() {
		t.Fatalf("engine reports %s, older than the modern rendering's %s", modern, chstore.ModernSince)
	}
	for _, tc := range []struct {
		name    string
		cluster string
		version chstore.Version
	}{
		{"single_portable", "", chstore.Version{Major: 18, Minor: 16, Patch: 1}},
		{"single_modern", "", modern},
		{"cluster_local_portable", "kvtrail_cluster", chstore.Version{Major: 18, Minor: 16, Patch: 1}},
		{"cluster_local_modern", "kvtrail_cluster", modern},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "kvt_mig_" + tc.name
			s, err := eng.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			n := migrate(t, s, chstore.Layout{Database: db, Cluster: tc.cluster, Version: tc.version})
			if n == 0 {
				t.Fatal("no statement ran")
			}
			// The tables the migrations create exist with the layout's names.
			var tables uint64
			if err := s.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = ?", db).Scan(&tables); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d statements, %d tables", n, tables)
			if tables < 10 {
				t.Errorf("%d tables after migrating", tables)
			}
			want := "raw_lines"
			if tc.cluster != "" {
				want = "raw_lines_local"
			}
			// Skip indexes exactly where the server has them.
			var idx uint64
			if err := s.QueryRow(context.Background(), "SELECT count() FROM system.data_skipping_indices WHERE database = ?", db).Scan(&idx); err != nil {
				t.Fatal(err)
			}
			if (idx > 0) != tc.version.Modern() {
				t.Errorf("%d skip indexes for a %s server", idx, tc.version)
			}
			checkEventTime(t, s, db, tc.cluster != "", tc.version.Modern())
			var has uint64
			if err := s.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, want).Scan(&has); err != nil || has != 1 {
				t.Errorf("table %s missing (%v)", want, err)
			}
		})
	}
}

// eventTimeTables are the tables with a nanosecond time (ts_ns, or
// boot_ts_ns, or ts_ms for metric samples) and the DateTime64 column the
// modern rendering adds next to it (migration 0007).
var eventTimeTables = []struct{ table, seconds, precise, column, typ string }{
	{"raw_lines", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"engine_events", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"batch_stats", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"transfer_events", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"gateway_responses", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"page_events", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"request_facts", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"case_evidence", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"audit_log", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"probes", "ts", "ts_ns", "event_time", "DateTime64(9, 'UTC')"},
	{"node_boots", "boot_ts", "boot_ts_ns", "boot_time", "DateTime64(9, 'UTC')"},
	{"metric_samples", "ts", "ts_ms", "event_time", "DateTime64(3, 'UTC')"},
}

// checkEventTime: the modern rendering adds each event-time table's
// DateTime64 column, MATERIALIZED (so no INSERT or SELECT * sees it); the
// second-precision column every query compares stays DateTime on both
// renderings (migration 0007 says why).
func checkEventTime(t *testing.T, s *chdbstore.Store, db string, cluster, modern bool) {
	t.Helper()
	for _, et := range eventTimeTables {
		table := et.table
		if cluster {
			table += "_local"
		}
		var secType string
		if err := s.QueryRow(context.Background(), "SELECT type FROM system.columns WHERE database = ? AND table = ? AND name = ?",
			db, table, et.seconds).Scan(&secType); err != nil || secType != "DateTime" {
			t.Errorf("%s.%s is %q (%v), want DateTime on every rendering", table, et.seconds, secType, err)
		}
		var typ, kind string
		err := s.QueryRow(context.Background(), "SELECT type, default_kind FROM system.columns WHERE database = ? AND table = ? AND name = ?",
			db, table, et.column).Scan(&typ, &kind)
		switch {
		case !modern && err == nil:
			t.Errorf("%s.%s exists in the portable rendering", table, et.column)
		case modern && err != nil:
			t.Errorf("%s.%s missing in the modern rendering: %v", table, et.column, err)
		case modern && (typ != et.typ || kind != "MATERIALIZED"):
			t.Errorf("%s.%s is %s %s, want %s MATERIALIZED", table, et.column, typ, kind, et.typ)
		}
	}
}

// On the modern schema, the lookups by id that the sorting keys do not
// lead with are answered through a skip index rather than by reading every
// granule: evidence lines by line_id (the finding and request pages; both
// the IN and the has(ids, line_id) spellings kvtrail sends), a request's
// engine events by line_id, and the current findings by run_id.
func TestLookupsUseSkipIndexes(t *testing.T) {
	ctx := context.Background()
	s, err := eng.Open("kvt_skipidx")
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	// 200k rows per table; ids are spread so that one id lives in one
	// granule, as line ids (hashes) and run ids (one run's findings are
	// written together) do.
	for _, q := range []string{
		`INSERT INTO raw_lines (ts, ts_ns, node, line_id, line)
SELECT toDateTime('2026-07-01 00:00:00') + intDiv(number, 10), number, concat('n', toString(number % 4)), cityHash64(number), concat('line ', toString(number))
FROM numbers(200000)`,
		`INSERT INTO engine_events (ts, ts_ns, node, line_id)
SELECT toDateTime('2026-07-01 00:00:00') + intDiv(number, 10), number, concat('n', toString(number % 4)), cityHash64(number)
FROM numbers(200000)`,
		`INSERT INTO findings (finding_id, run_id, analyzer, ts, created_at)
SELECT concat('f', toString(number)), concat('run', toString(intDiv(number, 100))), 'placeholder_decode', toDateTime('2026-07-01 00:00:00') + number, now()
FROM numbers(200000)`,
	} {
		if err := s.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"raw_lines", "engine_events", "findings"} {
		if err := s.Exec(ctx, "OPTIMIZE TABLE "+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, index, query, count string
	}{
		{"evidence line by IN", "idx_line_id",
			"SELECT line FROM raw_lines WHERE line_id IN (cityHash64(toUInt64(123)))",
			"SELECT count() FROM raw_lines WHERE line_id = cityHash64(toUInt64(123))"},
		{"evidence lines by has", "idx_line_id",
			"SELECT line FROM raw_lines WHERE has([cityHash64(toUInt64(123)), cityHash64(toUInt64(77))], line_id)",
			"SELECT count() FROM raw_lines WHERE has([cityHash64(toUInt64(123)), cityHash64(toUInt64(77))], line_id)"},
		{"request's engine events", "idx_line_id",
			"SELECT rid FROM engine_events WHERE has([cityHash64(toUInt64(123)), cityHash64(toUInt64(77))], line_id)",
			"SELECT count() FROM engine_events WHERE has([cityHash64(toUInt64(123)), cityHash64(toUInt64(77))], line_id)"},
		{"current findings by run", "idx_run_id",
			"SELECT finding_id FROM findings WHERE has(['run1234'], run_id)",
			"SELECT intDiv(count(), 100) FROM findings WHERE has(['run1234'], run_id)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := s.Query(ctx, "EXPLAIN indexes = 1 "+tc.query)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var l string
				if err := rows.Scan(&l); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, strings.TrimSpace(l))
			}
			text := strings.Join(plan, "\n")
			_, after, ok := strings.Cut(text, "Name: "+tc.index)
			if !ok {
				t.Fatalf("plan does not use %s:\n%s", tc.index, text)
			}
			// The granules left after the index must be fewer than before it.
			var kept, total int
			for _, l := range strings.Split(after, "\n") {
				if _, err := fmt.Sscanf(l, "Granules: %d/%d", &kept, &total); err == nil {
					break
				}
			}
			if total == 0 || kept >= total {
				t.Errorf("%s kept %d of %d granules:\n%s", tc.index, kept, total, text)
			}
			t.Logf("%s kept %d of %d granules", tc.index, kept, total)
			var n uint64
			if err := s.QueryRow(ctx, tc.count).Scan(&n); err != nil || n == 0 {
				t.Fatalf("lookup: %d rows, %v", n, err)
			}
		})
	}
}

// The TTL retention kvtrail sets on a modern server expires old rows but
// keeps those inside a case under legal hold.
func TestRetentionTTLKeepsLegalHolds(t *testing.T) {
	ctx := context.Background()
	s, err := eng.Open("kvt_ttl")
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	now := time.Now().UTC()
	rows := []struct {
		id   uint64
		ts   time.Time
		kept bool
	}{
		{1, now.AddDate(0, 0, -200), false},                      // expired
		{2, time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), true}, // expired but held
		{3, now.Add(-time.Hour), true},                           // recent
	}
	for _, r := range rows {
		if err := s.Exec(ctx, "INSERT INTO raw_lines (ts, ts_ns, node, line_id, line) SELECT ?, ?, 'n0', ?, 'x'", r.ts, uint64(r.ts.UnixNano()), r.id); err != nil {
			t.Fatal(err)
		}
	}
	holds := []chstore.HoldRange{{CaseID: "held", From: time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 1, 11, 0, 0, 0, 0, time.UTC)}}
	for _, q := range chstore.TTLStatements(s.Layout(), 90*24*time.Hour, holds) {
		if err := s.Exec(ctx, q); err != nil {
			t.Fatalf("TTL statement fails on %s: %v", eng.Version(), err)
		}
	}
	if err := s.Exec(ctx, "OPTIMIZE TABLE raw_lines FINAL"); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var n uint64
		if err := s.QueryRow(ctx, "SELECT count() FROM raw_lines WHERE line_id = ?", r.id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != r.kept {
			t.Errorf("line %d at %s: %d rows after TTL, want kept=%v", r.id, r.ts.Format(time.DateTime), n, r.kept)
		}
	}
}

// docker-compose.yml runs the ClickHouse release this tier tests, which
// gets the modern schema rendering.
func TestComposeUsesTestedVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`image:\s*clickhouse/clickhouse-server:(\d+)\.(\d+)\b`).FindSubmatch(b)
	if m == nil {
		t.Fatal("docker-compose.yml has no clickhouse/clickhouse-server:MAJOR.MINOR image")
	}
	v := eng.Version()
	if got, want := string(m[1])+"."+string(m[2]), fmt.Sprintf("%d.%d", v.Major, v.Minor); got != want {
		t.Errorf("docker-compose.yml runs ClickHouse %s; the tier tests %s", got, want)
	}
	// kvtrail serve migrates the compose server with the rendering the
	// tier runs: the modern one.
	var composed chstore.Version
	if _, err := fmt.Sscanf(string(m[1])+"."+string(m[2]), "%d.%d", &composed.Major, &composed.Minor); err != nil || !composed.Modern() {
		t.Errorf("docker-compose.yml's ClickHouse %s does not get the modern schema (%v)", composed, err)
	}
}

// Retention leaves a table alone when its TTL is already the one to set
// (re-setting it makes the server recompute TTL information for every
// part), and sets it when the keep period or the held spans differ.
func TestRetentionTTLCurrent(t *testing.T) {
	ctx := context.Background()
	s, err := eng.Open("kvt_ttl_current")
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	day := 24 * time.Hour
	held := []chstore.HoldRange{{CaseID: "a", From: time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 1, 11, 0, 0, 0, 0, time.UTC)}}
	two := append([]chstore.HoldRange{{CaseID: "b", From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}}, held...)
	stmt := func(keep time.Duration, holds []chstore.HoldRange) string {
		return chstore.TTLStatements(s.Layout(), keep, holds)[0] // raw_lines
	}
	current := func(q string) bool {
		t.Helper()
		ok, err := chstore.TTLCurrent(ctx, s, s.Database(), "raw_lines", q)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if current(stmt(90*day, held)) {
		t.Fatal("a table without TTL reported current")
	}
	if err := s.Exec(ctx, stmt(90*day, held)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    string
		want bool
	}{
		{"same keep and holds", stmt(90*day, held), true},
		{"other keep", stmt(30*day, held), false},
		{"another hold", stmt(90*day, two), false},
		{"holds released", stmt(90*day, nil), false},
	} {
		if got := current(tc.q); got != tc.want {
			t.Errorf("%s: current = %v, want %v", tc.name, got, tc.want)
		}
	}
	// And the other way round: a TTL without holds is not one with them.
	if err := s.Exec(ctx, stmt(90*day, nil)); err != nil {
		t.Fatal(err)
	}
	if !current(stmt(90*day, nil)) || current(stmt(90*day, held)) {
		t.Error("TTL without holds: current must match exactly")
	}
}
