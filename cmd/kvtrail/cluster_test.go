package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/sqlcheck"
	"github.com/kvtrail/kvtrail/internal/testcluster"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// ingestedTables are compared row for row (FINAL counts) between the single
// server and the cluster.
var ingestedTables = []string{"raw_lines", "id_index", "node_boots", "nodes", "engine_events", "batch_stats",
	"transfer_events", "gateway_responses", "metric_samples", "metric_series", "line_sources", "ingest_sources", "request_facts"}

// The proof: on two shards × two replicas of ClickHouse 18.16 with
// ZooKeeper, two kvtrail processes ingest the same simulated incident at
// once while one replica of each shard is stopped mid-ingest; every
// accepted row is there once the replicas are back, queries answer during
// the outage, and the analyzers and the affected list equal a single-server
// run on the same data.
func TestClusterMatchesSingleServer(t *testing.T) {
	t0 := time.Now()
	ctx := context.Background()
	simDir := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.05, Days: 3, OutDir: simDir}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(simDir, "sources.yaml")

	// Reference: one server.
	single := testdb.New(t)
	sources, err := ingest.LoadManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.New(single, ingest.Options{}).Ingest(ctx, sources); err != nil {
		t.Fatalf("single-server ingest: %v", err)
	}
	wantFindings, wantAffected := analyzeAll(t, single)
	wantCounts := finalCounts(t, single)
	logSizes(t, single)
	t.Logf("single server: %d findings, %d affected rows, %d raw lines (%s)", len(wantFindings), len(wantAffected), wantCounts["raw_lines"], time.Since(t0))

	t1 := time.Now()
	c := testcluster.Start(t, testcluster.Options{})
	t.Logf("ZooKeeper + 4 ClickHouse servers up in %s", time.Since(t1))
	const db = "kvt_cluster"
	env := func(addrs ...string) []string {
		return []string{"KVTRAIL_CLICKHOUSE_ADDR=" + strings.Join(addrs, ","), "KVTRAIL_CLICKHOUSE_DATABASE=" + db,
			"KVTRAIL_CLICKHOUSE_CLUSTER=" + c.Name, "KVTRAIL_CLICKHOUSE_DIAL_TIMEOUT=1s", "KVTRAIL_LOG_LEVEL=warn"}
	}
	s11, s12, s21, s22 := c.Node(1, 1), c.Node(1, 2), c.Node(2, 1), c.Node(2, 2)
	envA := env(s11.Addr, s21.Addr, s12.Addr, s22.Addr)
	envB := env(s22.Addr, s12.Addr, s21.Addr, s11.Addr)
	dir := t.TempDir()
	if out, errOut, code := run(t, dir, envA, "migrate"); code != 0 {
		t.Fatalf("cluster migrate: exit %d\n%s\n%s", code, out, errOut)
	}

	// Two kvtrail processes ingest the whole dataset at once, A connected
	// to shard 1 replica 1 first and B to shard 2 replica 2.
	type result struct {
		out  string
		err  error
		name string
	}
	done := make(chan result, 2)
	for name, e := range map[string][]string{"A": envA, "B": envB} {
		cmd := exec.Command(binary, "ingest", "--manifest", manifest)
		cmd.Dir, cmd.Env = dir, append(cleanEnv(), e...)
		go func() {
			out, err := cmd.CombinedOutput()
			done <- result{string(out), err, name}
		}()
	}
	probe := clusterStore(t, c.Name, db, s12.Addr, s21.Addr)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n uint64
		_ = probe.QueryRow(ctx, "SELECT count() FROM raw_lines").Scan(&n)
		if n > 0 || time.Now().After(deadline) {
			t.Logf("stopping shard 1 replica 1 and shard 2 replica 2 with %d raw lines in", n)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tStop := time.Now()
	stopBoth(s11, s22)
	t.Logf("replicas stopped in %s", time.Since(tStop))
	for range 2 {
		r := <-done
		if r.err != nil {
			t.Fatalf("kvtrail ingest %s with replicas going down: %v\n%s", r.name, r.err, r.out)
		}
	}

	// Queries answer with a replica of each shard down; readiness says
	// degraded and names them; migrate status shows them unreachable.
	var n uint64
	if err := probe.QueryRow(ctx, "SELECT count() FROM raw_lines FINAL").Scan(&n); err != nil || n == 0 {
		t.Fatalf("query with replicas down: %d rows, %v", n, err)
	}
	if down, err := probe.PingShards(ctx); err != nil || len(down) != 2 {
		t.Fatalf("PingShards with two replicas down = %v, %v", down, err)
	}
	out, errOut, code := run(t, dir, envB, "migrate", "status")
	if code != 0 || strings.Count(out, "unreachable") != 2 || strings.Count(out, " ok ") != 2 {
		t.Fatalf("migrate status with replicas down: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("migrate status during the outage:\n%s", out)

	// Back up: replication catches up and nothing accepted is missing.
	tUp := time.Now()
	for _, nd := range []*testcluster.Node{s11, s22} {
		if err := nd.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitReplicated(t, c, db)
	t.Logf("replicas restarted and caught up in %s", time.Since(tUp))

	cs := clusterStore(t, c.Name, db, c.Addrs()...)
	gotCounts := finalCounts(t, cs)
	for _, tb := range ingestedTables {
		if tb == "request_facts" {
			continue // written by analyze, compared below
		}
		if gotCounts[tb] != wantCounts[tb] {
			t.Errorf("%s: cluster has %d rows (FINAL), single server %d", tb, gotCounts[tb], wantCounts[tb])
		}
	}
	gotFindings, gotAffected := analyzeAll(t, cs)
	if gotCounts = finalCounts(t, cs); gotCounts["request_facts"] != wantCounts["request_facts"] {
		t.Errorf("request_facts: cluster %d, single server %d", gotCounts["request_facts"], wantCounts["request_facts"])
	}
	compare(t, "findings (id severity)", wantFindings, gotFindings)
	compare(t, "affected rows", wantAffected, gotAffected)
	if len(wantFindings) == 0 || len(wantAffected) == 0 {
		t.Fatal("the simulated incident produced no findings: the comparison proves nothing")
	}
	compareSearches(t, single, cs)
	t.Logf("cluster: %d findings and %d affected rows equal the single server; total %s", len(gotFindings), len(gotAffected), time.Since(t0))
}

// compareSearches runs the UI's request searches by rid and by node, whose
// room subqueries read engine_events inside a read of gateway_responses
// (GLOBAL IN on a cluster), on both stores: the same totals and requests.
func compareSearches(t *testing.T, single, cs *chstore.Store) {
	t.Helper()
	ctx := context.Background()
	var rid, node string
	if err := single.QueryRow(ctx, "SELECT rid, node FROM engine_events WHERE rid != '' AND bootstrap_room != 0 AND role = 'decode' ORDER BY line_id LIMIT 1").Scan(&rid, &node); err != nil {
		t.Fatalf("a decode rid to search: %v", err)
	}
	for _, q := range []domain.SearchQuery{{RID: rid, Limit: 50}, {Node: node, Limit: 50}} {
		var pages [2]domain.SearchPage
		for i, s := range []*chstore.Store{single, cs} {
			p, err := chstore.NewUIStore(s, time.Minute).SearchRequests(ctx, q)
			if err != nil {
				t.Fatalf("search %+v on store %d: %v", q, i, err)
			}
			pages[i] = p
		}
		ids := func(p domain.SearchPage) (out []string) {
			for _, r := range p.Rows {
				out = append(out, r.RequestID)
			}
			return out
		}
		if pages[0].Total == 0 || pages[0].Total != pages[1].Total || strings.Join(ids(pages[0]), ",") != strings.Join(ids(pages[1]), ",") {
			t.Errorf("search rid %q node %q: single server %d (%v), cluster %d (%v)", q.RID, q.Node, pages[0].Total, ids(pages[0]),
				pages[1].Total, ids(pages[1]))
		}
	}
}

// logSizes prints rows and on-disk bytes per row of each table: the
// measured basis of docs/cluster.md's sizing.
func logSizes(t *testing.T, s *chstore.Store) {
	t.Helper()
	_ = s.Exec(context.Background(), "OPTIMIZE TABLE raw_lines FINAL")
	rows, err := s.Query(context.Background(), `SELECT table, sum(rows) AS n, sum(data_compressed_bytes) AS zb, sum(data_uncompressed_bytes) AS ub
FROM system.parts WHERE database = ? AND active GROUP BY table ORDER BY zb DESC`, s.Database())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tb string
		var n, zb, ub uint64
		if err := rows.Scan(&tb, &n, &zb, &ub); err != nil || n == 0 {
			continue
		}
		t.Logf("size %-18s %8d rows %10d B compressed (%.0f B/row, %.0f B/row uncompressed)", tb, n, zb, float64(zb)/float64(n), float64(ub)/float64(n))
	}
}

func stopBoth(a, b *testcluster.Node) {
	done := make(chan struct{})
	go func() { a.Stop(); close(done) }()
	b.Stop()
	<-done
}

func clusterStore(t *testing.T, cluster, db string, addrs ...string) *chstore.Store {
	t.Helper()
	s, err := chstore.Open(context.Background(), chstore.Options{
		Addrs: addrs, Database: db, Username: "default", Cluster: cluster,
		DialTimeout: time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 4,
		OnStatement: func(sql string) {
			if err := sqlcheck.Check(sql); err != nil {
				t.Errorf("statement fails the modern grammar: %v", err)
			}
		},
	})
	if err != nil {
		t.Fatalf("open cluster store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func analyzeAll(t *testing.T, s *chstore.Store) (findings, affected []string) {
	t.Helper()
	ctx := context.Background()
	r := analyze.Runner{DB: s, Cfg: analyze.DefaultConfig(), Trigger: "test"}
	if _, err := r.Run(ctx, analyze.Window{}, nil); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	fs, err := s.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		findings = append(findings, f.ID+" "+string(f.Severity))
	}
	rec, err := analyze.LatestAffected(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	// Each row whole (its evidence by count): on the cluster the server
	// folds the list from a Distributed stage (migration 0019).
	for _, a := range rec.Rows {
		affected = append(affected, fmt.Sprintf("%s %s %s requests %d %v findings %v counterparts %v models %v nodes %v tokens %d/%d, %d lines",
			a.Tenant, a.Role, a.Tier, a.Requests, a.RequestKeys, a.FindingIDs, a.Counterparts, a.Models, a.Nodes,
			a.PromptTokens, a.OutputTokens, len(a.Evidence)))
	}
	sort.Strings(findings)
	sort.Strings(affected)
	return findings, affected
}

func finalCounts(t *testing.T, s *chstore.Store) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, tb := range ingestedTables {
		var n uint64
		if err := s.QueryRow(context.Background(), "SELECT count() FROM "+tb+" FINAL").Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tb, err)
		}
		out[tb] = n
	}
	return out
}

// waitReplicated waits until every host's replication queue is empty and
// the two replicas of each shard hold the same rows of raw_lines_local and
// of the other local tables named. kvtrail reads what it wrote through the
// first live replica of each shard (load_balancing in_order); a test's own
// read of another process's writes waits for the second replica too, as a
// write that failed over to it under load is not on the first until it is
// fetched. The wait is logged when there was one.
func waitReplicated(t *testing.T, c *testcluster.Cluster, db string, tables ...string) {
	t.Helper()
	ctx := context.Background()
	tables = append([]string{"raw_lines_local"}, tables...)
	t0 := time.Now()
	deadline := t0.Add(90 * time.Second)
	var first []string
	for {
		var state []string
		for _, nd := range c.Nodes {
			s, err := chstore.Open(ctx, chstore.Options{Addrs: []string{nd.Addr}, Database: db, Username: "default",
				DialTimeout: time.Second, ReadTimeout: 10 * time.Second, MaxOpenConns: 1})
			if err != nil {
				state = append(state, "down")
				continue
			}
			var queue uint64
			_ = s.QueryRow(ctx, "SELECT toUInt64(sum(queue_size)) FROM system.replicas WHERE database = ?", db).Scan(&queue)
			st := fmt.Sprint(queue)
			for _, tb := range tables {
				var rows uint64
				_ = s.QueryRow(ctx, "SELECT count() FROM "+tb).Scan(&rows)
				st += fmt.Sprintf("/%d", rows)
			}
			_ = s.Close()
			state = append(state, st)
		}
		synced := true
		for i := 0; i+1 < len(state); i += 2 {
			if state[i] != state[i+1] || !strings.HasPrefix(state[i], "0/") {
				synced = false
			}
		}
		if first == nil {
			first = state
		}
		if synced {
			if strings.Join(first, " ") != strings.Join(state, " ") {
				t.Logf("replicas caught up after %s: queue/rows of %v per host %v, first seen %v",
					time.Since(t0).Round(time.Millisecond), tables, state, first)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not catch up: queue/rows of %v per host %v", tables, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func compare(t *testing.T, what string, want, got []string) {
	t.Helper()
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return
	}
	t.Errorf("%s differ: single server %d, cluster %d\nonly single: %v\nonly cluster: %v", what, len(want), len(got),
		head(minus(want, got)), head(minus(got, want)))
}

// minus is a without the items of b.
func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

func head(s []string) []string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}
