package bench_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The ingest benchmark loads the same records both ways, measures a server
// floor, and leaves none of its scratch tables behind.
func TestIngestBenchmark(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 3, Scale: 0.01, Days: 1, OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	sources, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := testdb.New(t)
	res, err := bench.Ingest(ctx, s, testdb.Addr(t), sources, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lines == 0 || res.BaselineRows != res.Lines {
		t.Fatalf("the input has %d lines, the baseline loaded %d rows; want the same, non-zero", res.Lines, res.BaselineRows)
	}
	// Tracebacks join the record they belong to, so records <= lines.
	if res.Records == 0 || res.Records > res.Lines {
		t.Fatalf("kvtrail stored %d records from %d lines", res.Records, res.Lines)
	}
	if res.Kvtrail <= 0 || res.Baseline <= 0 || res.ServerFloor <= 0 {
		t.Fatalf("durations must all be measured: %+v", res)
	}
	if r := res.Ratio(); r <= 0 || r != res.LinesPerSec()/res.BaselineLinesPerSec() {
		t.Fatalf("ratio %v", r)
	}
	// Each side's CPU is measured: kvtrail's process, clickhouse-client's,
	// and the server's query threads during each (the server is shared
	// with other test packages, so only their presence is checked).
	if res.KvtrailCPU <= 0 || res.KvtrailServerCPU <= 0 || res.BaselineCPU <= 0 || res.BaselineServerCPU <= 0 {
		t.Fatalf("CPU times must all be measured: kvtrail %v + server %v, baseline %v + server %v",
			res.KvtrailCPU, res.KvtrailServerCPU, res.BaselineCPU, res.BaselineServerCPU)
	}
	if want := (res.BaselineCPU + res.BaselineServerCPU).Seconds() / (res.KvtrailCPU + res.KvtrailServerCPU).Seconds(); math.Abs(res.CPURatio()-want) > 1e-9 {
		t.Fatalf("CPU ratio %v, want %v", res.CPURatio(), want)
	}
	var left uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name LIKE 'bench_%'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d bench_ tables left behind", left)
	}
	t.Logf("%d records: kvtrail %v, baseline %v, server floor %v (ceiling ratio %.2f)", res.Records, res.Kvtrail, res.Baseline, res.ServerFloor, res.CeilingRatio())

	// A second run (bench ingest --runs) starts from empty tables.
	if err := bench.Reset(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Ingest(ctx, s, testdb.Addr(t), sources, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	var rows uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM raw_lines").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != res.Records {
		t.Fatalf("after Reset and a second run raw_lines holds %d rows, one run writes %d", rows, res.Records)
	}
}
