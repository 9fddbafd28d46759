package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// TestCurrentFindingsRule: the adapter reads runs and findings back and
// applies the one current-findings rule: the latest analysis per analyzer
// plus later live rounds with findings, one copy per finding id.
func TestCurrentFindingsRule(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	runs := []struct {
		id, trigger string
		started     time.Time
		findings    []string
	}{
		{"r1", "cli", t0, []string{"f-old", "f-both"}},
		{"r2", "cli", t0.Add(time.Hour), []string{"f-both", "f-new"}},
		{"r3", domain.TriggerLive, t0.Add(2 * time.Hour), []string{"f-live"}},
		{"r0", domain.TriggerLive, t0.Add(-time.Hour), []string{"f-stale-live"}},
	}
	var runRows, findingRows [][]any
	for _, r := range runs {
		runRows = append(runRows, []any{r.id, "a", "1", "", t0, t0, t0, r.started, r.started, domain.StatusSuccess,
			uint32(len(r.findings)), uint32(0), "", r.trigger, ""})
		for _, f := range r.findings {
			findingRows = append(findingRows, []any{f, r.id, "a", "1", "HIGH", t0, t0, t0, "t", r.started})
		}
	}
	batch(t, s, `INSERT INTO analyzer_runs (run_id, analyzer, version, params, window_from, window_to,
 watermark, started_at, finished_at, status, findings, high, error, trigger, case_id)`, runRows)
	batch(t, s, `INSERT INTO findings (finding_id, run_id, analyzer, analyzer_version, severity, ts,
 first_ts, last_ts, title, created_at)`, findingRows)
	ids, err := s.CurrentRunIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids, []string{"r2", "r3"}; !equal(got, want) {
		t.Fatalf("current runs = %v, want %v", got, want)
	}
	fs, err := s.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.ID)
	}
	if want := []string{"f-both", "f-live", "f-new"}; !equal(got, want) {
		t.Fatalf("current findings = %v, want %v", got, want)
	}
	// The filtered read: the same rule, then only what keep accepts (and
	// never a finding the rule leaves out, such as f-old).
	kept, err := s.LatestFindingsWhere(ctx, func(f *domain.Finding) bool { return f.ID != "f-live" && f.RunID != "r3" })
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, f := range kept {
		got = append(got, f.ID)
	}
	if want := []string{"f-both", "f-new"}; !equal(got, want) {
		t.Fatalf("current findings kept = %v, want %v", got, want)
	}
}

func batch(t *testing.T, s *chstore.Store, insert string, rows [][]any) {
	t.Helper()
	b, err := s.PrepareBatch(context.Background(), insert)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
