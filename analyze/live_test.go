package analyze

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/simulate"
)

// TestLiveRoundsAddNothingToAnalyzedData is the seam between `kvtrail
// analyze` and serve's live analysis: once the incident is analyzed, live
// rounds over the end of the data, and over the wall clock's recent past
// far beyond it, must not create finding ids, re-date findings or replace
// the notification list; and analyzing twice must not double anything.
func TestLiveRoundsAddNothingToAnalyzedData(t *testing.T) {
	db, _ := loaded(t, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.02, Days: 2})
	ctx := context.Background()
	full := &Runner{DB: db, Cfg: DefaultConfig(), Trigger: "test", Now: func() time.Time { return testNow }}
	rep, err := full.Run(ctx, Window{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := db.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) == 0 {
		t.Fatal("the incident has no findings")
	}
	affBefore, err := LatestAffected(ctx, db)
	if err != nil {
		t.Fatal(err)
	}

	// Analyzing the same data again changes nothing a reader sees.
	full.Now = func() time.Time { return testNow.Add(time.Minute) }
	if _, err := full.Run(ctx, Window{}, nil); err != nil {
		t.Fatal(err)
	}
	again, err := db.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameFindings(before, again) {
		t.Fatalf("a second analysis changed the findings: %d then %d", len(before), len(again))
	}

	// The analyses recorded their rows as a link (the second took the
	// first's); live rounds record none: a minute's window is no link of
	// the incident's requests.
	linkBefore, ok, err := db.LatestFactLink(ctx)
	if err != nil || !ok {
		t.Fatalf("the analysis recorded no link of its rows (%v)", err)
	}
	end := rep.Window.To
	live := &Runner{DB: db, Cfg: DefaultConfig(), Trigger: TriggerLive, Live: true}
	for i, w := range []Window{
		{From: end.Add(-30 * time.Minute), To: end},
		{From: testNow.Add(-time.Hour), To: testNow},
		{From: testNow.Add(-time.Hour), To: testNow},
	} {
		now := testNow.Add(time.Duration(2+i) * time.Minute)
		live.Now = func() time.Time { return now }
		lr, err := live.Run(ctx, w, nil)
		if err != nil {
			t.Fatalf("live round %d: %v", i, err)
		}
		for _, r := range lr.Runs {
			if len(r.New) != 0 {
				t.Errorf("live round %d over %s: %s reports %d new findings over analyzed data (first %q, dated %s)",
					i, w, r.Run.Analyzer, len(r.New), r.New[0].Title, r.New[0].TS)
			}
		}
		if lr.Reconstruction != nil {
			t.Errorf("live round %d rebuilt the notification list", i)
		}
	}
	if link, _, err := db.LatestFactLink(ctx); err != nil || link.Version != linkBefore.Version {
		t.Errorf("live rounds recorded a link: version %d, was %d (%v)", link.Version, linkBefore.Version, err)
	}
	after, err := db.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameFindings(before, after) {
		t.Errorf("live rounds changed the findings: %d before, %d after", len(before), len(after))
	}
	for _, f := range after {
		if f.TS.After(end) {
			t.Errorf("%s finding %s is dated %s, after the last evidence (%s)", f.Analyzer, f.ID, f.TS, end)
		}
	}
	affAfter, err := LatestAffected(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if affAfter.ID != affBefore.ID || len(affAfter.Rows) != len(affBefore.Rows) {
		t.Errorf("live rounds replaced the notification list: %s (%d rows) → %s (%d rows)",
			affBefore.ID, len(affBefore.Rows), affAfter.ID, len(affAfter.Rows))
	}
}

// sameFindings compares what a reader sees: ids, times and severities.
func sameFindings(a, b []Finding) bool {
	key := func(fs []Finding) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.ID + " " + f.TS.UTC().Format(time.RFC3339) + " " + string(f.Severity)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
