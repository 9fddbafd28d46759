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
	onCluster  = regexp.MustCompile(` ON CLUSTER [A-Za-z0-9_]+`)
	replicated = regexp.MustCompile(`Replicated([A-Za-z]+)\('[^']*', '[^']*'(?:, )?`)
)

// localPart turns a cluster-layout statement into what it does on one
// host: no ON CLUSTER (the engine is one host, without a cluster
// definition), and Replicated engines without their ZooKeeper path and
// replica (it has no Keeper), so the local tables' columns, keys, settings
// and indexes run as rendered. The Distributed tables over them need a
// remote_servers cluster and are left out (ok false).
func localPart(st string) (string, bool) {
	if strings.Contains(st, "ENGINE = Distributed(") {
		return "", false
	}
	st = onCluster.ReplaceAllString(st, "")
	return replicated.ReplaceAllString(st, "$1("), true
}

// Every migration runs on ClickHouse 26.7 in both renderings (the portable
// one kvtrail uses on 18.16 and the modern one it uses on this version),
// in the single-server layout and in the cluster layout's local tables.
func TestMigrationsOnModernEngine(t *testing.T) {
	modern := eng.Version()
	if modern.Legacy() {
		t.Fatalf("engine reports %s", modern)
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
			if (idx > 0) != !tc.version.Legacy() {
				t.Errorf("%d skip indexes for a %s server", idx, tc.version)
			}
			var has uint64
			if err := s.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, want).Scan(&has); err != nil || has != 1 {
				t.Errorf("table %s missing (%v)", want, err)
			}
		})
	}
}

// On the modern schema, looking up evidence lines by id (what the finding
// and request pages do) is answered through the line_id skip index rather
// than by reading every granule.
func TestEvidenceLookupUsesSkipIndex(t *testing.T) {
	ctx := context.Background()
	s, err := eng.Open("kvt_skipidx")
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	// 200k lines in 4 parts' worth of granules; line ids are spread so
	// that a single id lives in one granule.
	if err := s.Exec(ctx, `INSERT INTO raw_lines (ts, ts_ns, node, line_id, line)
SELECT toDateTime('2026-07-01 00:00:00') + intDiv(number, 10), number, concat('n', toString(number % 4)), cityHash64(number), concat('line ', toString(number))
FROM numbers(200000)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "OPTIMIZE TABLE raw_lines FINAL"); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Query(ctx, "EXPLAIN indexes = 1 SELECT line FROM raw_lines WHERE line_id IN (cityHash64(toUInt64(123)))")
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
	if !strings.Contains(text, "idx_line_id") {
		t.Fatalf("plan does not use idx_line_id:\n%s", text)
	}
	// The granules left after the index must be fewer than before it.
	after := strings.SplitN(text, "Name: idx_line_id", 2)[1]
	var kept, total int
	for _, l := range strings.Split(after, "\n") {
		if _, err := fmt.Sscanf(l, "Granules: %d/%d", &kept, &total); err == nil {
			break
		}
	}
	if total == 0 || kept >= total {
		t.Errorf("idx_line_id kept %d of %d granules:\n%s", kept, total, text)
	}
	t.Logf("idx_line_id kept %d of %d granules", kept, total)
	var n uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM raw_lines WHERE line_id = cityHash64(toUInt64(123))").Scan(&n); err != nil || n != 1 {
		t.Fatalf("lookup: %d rows, %v", n, err)
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

// docker-compose.yml runs the ClickHouse release this tier tests.
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
}
