package bench_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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
	// The replay's cost: whole analyses with and without it, same data.
	if len(res.Replay.With) < 2 || len(res.Replay.Without) != len(res.Replay.With) {
		t.Fatalf("replay cost measured %d with / %d without, want as many of each, at least 2", len(res.Replay.With), len(res.Replay.Without))
	}
	for _, d := range append(res.Replay.With, res.Replay.Without...) {
		if d <= 0 {
			t.Errorf("an analysis of the replay comparison was not timed: %v", res.Replay)
		}
	}
	if len(res.Replay.WithCPU) != len(res.Replay.With) || res.Replay.CPURatio() <= 0 {
		t.Errorf("replay CPU not measured: %+v", res.Replay)
	}
	if r := res.Replay.Ratio(); r <= 0 {
		t.Errorf("replay ratio %v", r)
	}
}

func TestReplayCostRatio(t *testing.T) {
	c := bench.ReplayCost{With: []time.Duration{12, 10, 11}, Without: []time.Duration{10, 9, 8}}
	if got := c.Ratio(); got != 11.0/9.0 {
		t.Errorf("ratio of medians = %v, want 11/9", got)
	}
	if got := (bench.ReplayCost{With: []time.Duration{3, 5}, Without: []time.Duration{2, 2}}).Ratio(); got != 2 {
		t.Errorf("even counts: ratio = %v, want (3+5)/2 / 2 = 2", got)
	}
	if got := (bench.ReplayCost{}).Ratio(); got != 0 {
		t.Errorf("nothing measured: ratio = %v, want 0", got)
	}
}
