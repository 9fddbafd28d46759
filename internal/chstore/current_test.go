package chstore_test

import (
	"context"
	"slices"
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
	kept, err := s.LatestFindingsWhere(ctx, nil, func(f *domain.Finding) bool { return f.ID != "f-live" && f.RunID != "r3" })
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

// TestCurrentFindingsAtLeast: a severity floor is judged by the server on
// each finding's current copy (a finding whose latest copy fell below the
// floor is not read through an older copy above it), and it gives what
// reading every current finding and judging it here gives.
func TestCurrentFindingsAtLeast(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	var runRows [][]any
	for _, r := range []struct{ id, analyzer string }{{"ra", "a"}, {"rb", "b"}} {
		runRows = append(runRows, []any{r.id, r.analyzer, "1", "", t0, t0, t0, t0, t0, domain.StatusSuccess,
			uint32(0), uint32(0), "", "cli", ""})
	}
	batch(t, s, `INSERT INTO analyzer_runs (run_id, analyzer, version, params, window_from, window_to,
 watermark, started_at, finished_at, status, findings, high, error, trigger, case_id)`, runRows)
	// Copies of one finding differ by created_at: the later is current.
	var rows [][]any
	for _, f := range []struct {
		id, run, analyzer string
		sev               domain.Severity
		created           time.Duration
	}{
		{"f-demoted", "ra", "a", domain.Medium, 0},
		{"f-demoted", "ra", "a", domain.Low, time.Minute},
		{"f-promoted", "ra", "a", domain.Low, 0},
		{"f-promoted", "ra", "a", domain.High, time.Minute},
		{"f-medium", "ra", "a", domain.Medium, 0},
		{"f-low", "ra", "a", domain.Low, 0},
		{"f-note", "ra", "a", domain.Note, 0},
		{"g-high", "rb", "b", domain.High, 0},
		{"g-medium", "rb", "b", domain.Medium, 0},
	} {
		rows = append(rows, []any{f.id, f.run, f.analyzer, "1", string(f.sev), t0, t0, t0, "t", t0.Add(f.created)})
	}
	batch(t, s, `INSERT INTO findings (finding_id, run_id, analyzer, analyzer_version, severity, ts,
 first_ts, last_ts, title, created_at)`, rows)
	all, err := s.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		floor domain.SeverityFloor
		want  []string
	}{
		{"a at MEDIUM", domain.SeverityFloor{"a": domain.Medium}, []string{"f-medium", "f-promoted"}},
		{"a at LOW, b at HIGH", domain.SeverityFloor{"a": domain.Low, "b": domain.High}, []string{"f-demoted", "f-low", "f-medium", "f-promoted", "g-high"}},
		{"b at MEDIUM", domain.SeverityFloor{"b": domain.Medium}, []string{"g-high", "g-medium"}},
		{"a at NOTE", domain.SeverityFloor{"a": domain.Note}, []string{"f-demoted", "f-low", "f-medium", "f-note", "f-promoted"}},
		{"empty", domain.SeverityFloor{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := s.LatestFindingsWhere(ctx, tc.floor, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				got = append(got, f.ID)
				if f.ID == "f-promoted" && f.Severity != domain.High {
					t.Errorf("f-promoted read as its older %s copy", f.Severity)
				}
			}
			slices.Sort(got)
			if !equal(got, tc.want) {
				t.Errorf("floor %v: got %v, want %v", tc.floor, got, tc.want)
			}
			var judged []string
			for _, f := range all {
				if tc.floor.Keeps(f.Analyzer, f.Severity) {
					judged = append(judged, f.ID)
				}
			}
			slices.Sort(judged)
			if !equal(got, judged) {
				t.Errorf("floor %v: server gave %v, judging every current finding gives %v", tc.floor, got, judged)
			}
		})
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
