package bench_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// The analyze benchmark's baseline streams every row the analysis reads:
// each scan returns as many rows as the table holds under the same filter.
func TestAnalyzeBaselineReadsTheRows(t *testing.T) {
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
	if _, err := ingest.New(s, ingest.Options{}).Ingest(ctx, sources); err != nil {
		t.Fatal(err)
	}
	res, err := bench.Analyze(ctx, s, analyze.DefaultConfig(), analyze.Window{})
	if err != nil {
		t.Fatal(err)
	}
	from, to := uint32(res.Window.From.Unix()), uint32(res.Window.To.Unix())
	want := map[string]string{
		"gateway_responses": "SELECT count() FROM gateway_responses WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)",
		"engine_events":     "SELECT count() FROM engine_events WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND event != 'http_access'",
	}
	seen := 0
	for _, sc := range res.Scans {
		q, ok := want[sc.Name]
		if !ok {
			continue
		}
		seen++
		var n uint64
		if err := s.QueryRow(ctx, q, from, to).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 || sc.Rows != n {
			t.Errorf("baseline %s streamed %d rows, the table holds %d under the filter", sc.Name, sc.Rows, n)
		}
		if sc.Duration <= 0 {
			t.Errorf("baseline %s not timed", sc.Name)
		}
	}
	if seen != len(want) {
		t.Errorf("baseline scans %v lack some of %v", res.Scans, want)
	}
}
