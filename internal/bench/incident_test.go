package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The incident benchmark runs every phase on real ClickHouse, reports a
// peak for each, and its list agrees with the truth at a small scale (the
// accuracy tests hold the bar; this holds the bench's own accounting).
func TestIncidentBenchmark(t *testing.T) {
	s := testdb.New(t)
	dir := t.TempDir()
	res, err := bench.Incident(context.Background(), s, bench.IncidentOptions{Scenario: "incident-2026", Scale: 0.02, Days: 2,
		Dir: dir, Cfg: analyze.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"simulate", "ingest", "link", "analyze", "notification list"}
	if len(res.Phases) != len(want) {
		t.Fatalf("phases %+v, want %v", res.Phases, want)
	}
	for i, p := range res.Phases {
		if p.Name != want[i] || p.Duration <= 0 || p.PeakRSS == 0 {
			t.Errorf("phase %d = %+v, want %s with a time and a peak", i, p, want[i])
		}
	}
	// The analysis's own steps: the ones the scale-100 figures are read
	// by, each timed, together within the analyze phase.
	steps := map[string]bool{}
	var sum time.Duration
	for _, st := range res.AnalyzeSteps {
		steps[st.Name] = true
		sum += st.Duration
	}
	for _, name := range []string{"load+correlate", "save request_facts", "analyzer abort_reuse", "reconstruct affected"} {
		if !steps[name] {
			t.Errorf("analysis steps %+v: no %q", res.AnalyzeSteps, name)
		}
	}
	if sum <= 0 || sum > res.Phases[3].Duration {
		t.Errorf("analysis steps add up to %s, the analyze phase took %s", sum, res.Phases[3].Duration)
	}
	// The link phase links the gateway-logged requests, as kvtrail ingest
	// does, and records the span: nothing is left pending for the next.
	if res.Linked == 0 || res.Linked > res.Requests {
		t.Errorf("the link phase saved %d facts of %d requests", res.Linked, res.Requests)
	}
	// The analysis after it takes the link's rows instead of writing the
	// same rows again.
	if res.Adopted != uint64(res.Linked) {
		t.Errorf("the analysis adopted %d requests' rows, the link saved %d", res.Adopted, res.Linked)
	}
	// abort_reuse's allocator replay also answers the reconstruction's
	// victims (analyze/replay_shared.go): one replay of the window, the
	// costliest step after the load, not two.
	if res.ReplayPasses != 1 {
		t.Errorf("the analysis replayed the allocator %d times, want once", res.ReplayPasses)
	}
	if _, pending, err := ingest.PendingCorrelation(context.Background(), s); err != nil || pending {
		t.Errorf("after the link phase: pending %v (%v), want the span recorded as linked", pending, err)
	}
	if res.Requests == 0 || res.Lines == 0 || res.DiskBytes == 0 {
		t.Fatalf("requests %d, records %d, disk %d: want all non-zero", res.Requests, res.Lines, res.DiskBytes)
	}
	if res.ReceivedTruth == 0 {
		t.Fatal("the incident has no tenant that received foreign data; the comparison proves nothing")
	}
	if !res.Received.Exact() {
		t.Errorf("received list %+v against %d true tenants: want exact", res.Received, res.ReceivedTruth)
	}
	if r := res.Exposed.Recall(); r < 0.99 {
		t.Errorf("exposed recall %.3f (%+v of %d)", r, res.Exposed, res.ExposedTruth)
	}

	// Again on the same database, as `bench incident --database` does with
	// a kept one: only the analysis phases run, against the same truth.
	again, err := bench.Incident(context.Background(), s, bench.IncidentOptions{Dir: dir, Ingested: true, Cfg: analyze.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Phases) != 2 || again.Phases[0].Name != "analyze" || again.Phases[1].Name != "notification list" {
		t.Fatalf("phases on an ingested incident %+v, want analyze and notification list", again.Phases)
	}
	if again.Requests != res.Requests || again.Received != res.Received || again.Exposed != res.Exposed ||
		again.ReconstructedAt.Before(res.ReconstructedAt) {
		t.Errorf("second analysis %+v, want the first's lists (%+v) from a reconstruction no older", again, res)
	}
}
