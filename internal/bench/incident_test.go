package bench_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The incident benchmark runs every phase on real ClickHouse, reports a
// peak for each, and its list agrees with the truth at a small scale (the
// accuracy tests hold the bar; this holds the bench's own accounting). It
// measures both ways from the lines to the list: `kvtrail ingest
// --analyze` (the default) and `kvtrail ingest` then `kvtrail analyze`.
func TestIncidentBenchmark(t *testing.T) {
	for _, tc := range []struct {
		name        string
		twoCommands bool
		pageSize    int
		phases      []string
	}{
		{"ingest --analyze", false, 0, []string{"simulate", "ingest", "analyze", "notification list"}},
		{"ingest then analyze", true, 0, []string{"simulate", "ingest", "link", "analyze", "notification list"}},
		// SGLang's default page size: the engines the bench simulates,
		// ingests and replays all allocate a page per token.
		{"page size 1", false, 1, []string{"simulate", "ingest", "analyze", "notification list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testIncidentBenchmark(t, tc.twoCommands, tc.pageSize, tc.phases)
		})
	}
}

func testIncidentBenchmark(t *testing.T, twoCommands bool, pageSize int, want []string) {
	s := testdb.New(t)
	dir := t.TempDir()
	res, err := bench.Incident(context.Background(), s, bench.IncidentOptions{Scenario: "incident-2026", Scale: 0.02, Days: 2,
		PageSize: pageSize, Dir: dir, Cfg: analyze.DefaultConfig(), TwoCommands: twoCommands})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []uint32
	if err := s.QueryRow(context.Background(), "SELECT arraySort(groupUniqArray(page_size)) FROM node_boots").Scan(&sizes); err != nil {
		t.Fatal(err)
	}
	if wantSize := uint32(cmp.Or(pageSize, 64)); !slices.Equal(sizes, []uint32{wantSize}) {
		t.Errorf("the engines booted with page sizes %v, want %d", sizes, wantSize)
	}
	if len(res.Phases) != len(want) {
		t.Fatalf("phases %+v, want %v", res.Phases, want)
	}
	for i, p := range res.Phases {
		t.Logf("phase %s: %s, peak RSS %d MB, peak live heap %d MB", p.Name, p.Duration, p.PeakRSS>>20, p.PeakLive>>20)
		// The live heap can exceed RSS: it counts memory allocated and
		// never written, which the OS has not made resident (at page size
		// 1 the replay's per-page growth records, which only growth
		// writes). Four times is far from a unit mistake's 1024.
		if p.Name != want[i] || p.Duration <= 0 || p.PeakRSS == 0 || p.PeakLive == 0 || p.PeakLive > 4*p.PeakRSS {
			t.Errorf("phase %d = %+v, want %s with a time, a peak RSS and a peak live heap of its order", i, p, want[i])
		}
	}
	analyzePhase := res.Phases[len(want)-2]
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
	if sum <= 0 || sum > analyzePhase.Duration {
		t.Errorf("analysis steps add up to %s, the analyze phase took %s", sum, analyzePhase.Duration)
	}
	// Either way the span is linked once and recorded: nothing is left
	// pending for the next ingest.
	if res.Linked == 0 || res.Linked > res.Requests {
		t.Errorf("the link saved %d facts of %d requests", res.Linked, res.Requests)
	}
	if twoCommands {
		// The analysis after the link takes the link's rows instead of
		// writing the same rows again.
		if res.Adopted != uint64(res.Linked) {
			t.Errorf("the analysis adopted %d requests' rows, the link saved %d", res.Adopted, res.Linked)
		}
	} else if res.Adopted != 0 {
		t.Errorf("the analysis of the span adopted %d requests' rows, but nothing had linked them", res.Adopted)
	}
	// abort_reuse's allocator replay also answers the reconstruction's
	// victims (analyze/replay_shared.go): one replay of the window, the
	// costliest step after the load, not two.
	if res.ReplayPasses != 1 {
		t.Errorf("the analysis replayed the allocator %d times, want once", res.ReplayPasses)
	}
	if _, pending, err := ingest.PendingCorrelation(context.Background(), s); err != nil || pending {
		t.Errorf("after the link: pending %v (%v), want the span recorded as linked", pending, err)
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
	// a kept one: only the analysis phases run, against the same truth,
	// and they take the rows the first run's link saved (the link phase's,
	// or the span analysis's own).
	again, err := bench.Incident(context.Background(), s, bench.IncidentOptions{Dir: dir, Ingested: true, Cfg: analyze.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Phases) != 2 || again.Phases[0].Name != "analyze" || again.Phases[1].Name != "notification list" {
		t.Fatalf("phases on an ingested incident %+v, want analyze and notification list", again.Phases)
	}
	if again.Adopted == 0 || again.Adopted > uint64(res.Linked) {
		t.Errorf("the second analysis adopted %d requests' rows, want the first run's (at most %d)", again.Adopted, res.Linked)
	}
	if again.Requests != res.Requests || again.Received != res.Received || again.Exposed != res.Exposed ||
		again.ReconstructedAt.Before(res.ReconstructedAt) {
		t.Errorf("second analysis %+v, want the first's lists (%+v) from a reconstruction no older", again, res)
	}

	// The kept simulation ingested into a fresh database, as `bench
	// incident --simulated` does: every phase but the simulation, the same
	// lines and the same lists.
	fresh := testdb.New(t)
	re, err := bench.Incident(context.Background(), fresh, bench.IncidentOptions{Dir: dir, Simulated: true,
		Cfg: analyze.DefaultConfig(), TwoCommands: twoCommands})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range re.Phases {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, want[1:]) {
		t.Errorf("phases of a kept simulation ingested again %v, want %v", names, want[1:])
	}
	if re.Requests != res.Requests || re.Lines != res.Lines || re.Received != res.Received || re.Exposed != res.Exposed {
		t.Errorf("the kept simulation ingested again gave %d requests, %d records, lists %+v and %+v; the first run %d, %d, %+v and %+v",
			re.Requests, re.Lines, re.Received, re.Exposed, res.Requests, res.Lines, res.Received, res.Exposed)
	}
}
