package analyze

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

// partsAnalyzer concludes in parts (an emitter, as abort_reuse): each part
// of n findings, the first finding of every part after the first a copy of
// one already emitted; failAfter > 0 fails after that many parts. Between
// parts it counts what the store holds.
type partsAnalyzer struct {
	parts, n, failAfter int
	count               func() int
	stored              []int // what the store held when each part was emitted
}

func (*partsAnalyzer) Name() string    { return "test_parts" }
func (*partsAnalyzer) Version() string { return "1" }
func (*partsAnalyzer) Params() any     { return nil }
func (a *partsAnalyzer) newPass() pass { return &partsPass{a} }
func (a *partsAnalyzer) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

type partsPass struct{ a *partsAnalyzer }

func (p *partsPass) slice(context.Context, *Dataset) ([]Finding, error) { return nil, nil }
func (p *partsPass) finish(ctx context.Context, d *Dataset) ([]Finding, error) {
	var all []Finding
	err := p.emit(ctx, d, func(fs []Finding) error { all = append(all, fs...); return nil })
	return all, err
}

func (p *partsPass) emit(_ context.Context, _ *Dataset, out func([]Finding) error) error {
	a := p.a
	for i := 0; i < a.parts; i++ {
		if a.failAfter > 0 && i == a.failAfter {
			return errors.New("planted failure")
		}
		a.stored = append(a.stored, a.count())
		var fs []Finding
		if i > 0 {
			fs = append(fs, Finding{Subject: "part-0-0", TS: testNow, Severity: Low, Title: "copy"})
		}
		for j := 0; j < a.n; j++ {
			fs = append(fs, Finding{Subject: fmt.Sprintf("part-%d-%d", i, j), TS: testNow, Severity: Low, Title: "t"})
		}
		if err := out(fs); err != nil {
			return err
		}
	}
	return nil
}

// TestStreamedConclusion: an emitter's findings are stored as its parts
// come, in inserts of streamBatch, each id once (the first copy); the run
// records them like any run; a lean report holds none; and a pass that
// fails part-way records an ERROR run whose stored parts are not current.
func TestStreamedConclusion(t *testing.T) {
	defer func(n int) { streamBatch = n }(streamBatch)
	streamBatch = 5
	ctx := context.Background()
	db := testdb.New(t)
	count := func() int {
		var n uint64
		if err := db.QueryRow(ctx, "SELECT count() FROM findings").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	w := Window{From: testNow.Add(-time.Hour), To: testNow.Add(time.Hour)}
	run := func(a *partsAnalyzer, lean bool, at time.Time) *Report {
		t.Helper()
		r := &Runner{DB: db, Cfg: DefaultConfig(), Analyzers: []Analyzer{a}, Trigger: "test", Lean: lean,
			SkipReconstruct: true, Now: func() time.Time { return at }}
		rep, err := r.Run(ctx, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	a := &partsAnalyzer{parts: 4, n: 6, count: count}
	rep := run(a, false, testNow)
	res := rep.Runs[0]
	if res.Run.Status != StatusSuccess || res.Run.Findings != 24 || len(res.Findings) != 24 || res.NewCount != 24 {
		t.Fatalf("run %+v: %d findings in the report, %d new; want 24 (4 parts of 6, copies dropped)",
			res.Run, len(res.Findings), res.NewCount)
	}
	if !slices.IsSortedFunc(res.Findings, func(x, y Finding) int { return strings.Compare(x.ID, y.ID) }) {
		t.Error("the report's findings are not sorted by id, as result sorts them")
	}
	// Stored part by part: a part's 6 new findings pass streamBatch (5),
	// so each part is stored before the next is emitted.
	if want := []int{0, 6, 12, 18}; !slices.Equal(a.stored, want) {
		t.Errorf("stored when each part was emitted: %v, want %v", a.stored, want)
	}
	fs, err := db.FindingsOfRuns(ctx, []string{res.Run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 24 {
		t.Fatalf("stored %d findings of the run, want 24", len(fs))
	}

	// Lean: the same counts, nothing held; every id known now.
	lean := run(&partsAnalyzer{parts: 4, n: 6, count: count}, true, testNow.Add(time.Minute)).Runs[0]
	if lean.Findings != nil || lean.New != nil || lean.Run.Findings != 24 || lean.NewCount != 0 {
		t.Errorf("lean run: %d findings held, %d new held, counts %d/%d new; want none held, 24, 0 new",
			len(lean.Findings), len(lean.New), lean.Run.Findings, lean.NewCount)
	}

	// A failure after two parts: an ERROR run, its stored parts not
	// current (the lean run's 24 stay the current findings).
	failed := run(&partsAnalyzer{parts: 4, n: 7, failAfter: 2, count: count}, true, testNow.Add(2*time.Minute)).Runs[0]
	if failed.Run.Status != StatusError || failed.Run.Findings != 0 {
		t.Fatalf("failed run %+v, want ERROR with no findings", failed.Run)
	}
	cur, err := db.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) != 24 || cur[0].RunID != lean.Run.ID {
		t.Errorf("current findings: %d of run %s, want the lean run's 24", len(cur), cur[0].RunID)
	}
}
