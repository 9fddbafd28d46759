package analyze

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"

	"github.com/kvtrail/kvtrail/simulate"
)

// An analysis after `kvtrail ingest`'s link takes the link's rows for the
// requests the gateway logged instead of saving them again, and finds
// exactly what an analysis that saves them finds. It does not when a run
// has since saved such rows (a merge would replace the link's), and when
// the link's digest disagrees it saves them itself, with the same result.
func TestRunAdoptsTheLinksFacts(t *testing.T) {
	ctx := context.Background()
	// Without the allocator replay, victims go to the node-window
	// fallback, which reads the run's rows back (DecodeFactRefs); sliced,
	// the speed fit and the reconstruction read them back too.
	db, _ := loaded(t, simulate.Config{Scenario: "incident-2026", Seed: 2, Scale: 0.1})
	cfg := DefaultConfig()
	cfg.DeferredRelease = "off"
	cfg.ignorePages = true
	cfg.SkipReplay = true
	cfg.SliceRequests = 400
	// The clock is after every line's ingested_at, as on the default path.
	base := time.Now().UTC().Add(time.Minute)
	at := func(m int) func() time.Time {
		return func() time.Time { return base.Add(time.Duration(m) * time.Minute) }
	}

	from, to, _, err := DataSpan(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	margin := cfg.LinkMargin
	clock := at(0)
	linker := &Runner{DB: db, Cfg: cfg, Trigger: "test", Now: func() time.Time { return clock() }}
	linked, err := linker.Correlate(ctx, Window{From: from.Add(-margin), To: to.Add(margin)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	link, ok, err := db.LatestFactLink(ctx)
	if err != nil || !ok {
		t.Fatalf("no link recorded (%v)", err)
	}
	if link.Digest.N != uint64(linked) || linked == 0 {
		t.Fatalf("the link saved %d requests, its record says %d", linked, link.Digest.N)
	}

	var store Store = db
	run := func(m int, noAdopt bool) *Report {
		t.Helper()
		r := &Runner{DB: store, Cfg: cfg, Trigger: "test", Now: at(m), NoAdopt: noAdopt}
		rep, err := r.Run(ctx, Window{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		withStoredList(t, db, rep)
		for _, x := range rep.Runs {
			if x.Run.Status == StatusError {
				t.Fatalf("%s: %s", x.Run.Analyzer, x.Run.Error)
			}
		}
		if rep.Slices < 5 {
			t.Fatalf("%d slices: the run did not read its rows back", rep.Slices)
		}
		return rep
	}
	// gatewayRows counts the rows of gateway-logged requests saved at the
	// run's version.
	gatewayRows := func(m int) uint64 {
		t.Helper()
		var n uint64
		if err := db.QueryRow(ctx, `SELECT count() FROM request_facts WHERE version = ? AND gateway_request_id != ''`,
			uint64(base.Add(time.Duration(m)*time.Minute).UnixNano())).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	adopted := run(1, false)
	if adopted.Adopted != uint64(linked) || adopted.Relinked {
		t.Fatalf("the run adopted %d requests' rows, the link saved %d", adopted.Adopted, linked)
	}
	if n := gatewayRows(1); n != 0 {
		t.Errorf("the adopting run saved %d rows of gateway-logged requests again", n)
	}

	saving := run(2, true)
	if saving.Adopted != 0 || gatewayRows(2) != uint64(linked) {
		t.Fatalf("the run told not to adopt adopted %d and saved %d of %d requests", saving.Adopted, gatewayRows(2), linked)
	}
	sameResults(t, "adopted", adopted, "saved", saving)

	// The saving run's rows are newer than the link's, which a merge may
	// have replaced: the next run must not take the link's. It takes the
	// saving run's instead, which that run recorded as a link of its own
	// (what makes `kvtrail ingest --analyze` the window's only link).
	own, ok, err := db.LatestFactLink(ctx)
	if err != nil || !ok || own.Version != uint64(base.Add(2*time.Minute).UnixNano()) || own.Digest.N != uint64(linked) {
		t.Fatalf("the saving run recorded %+v (found %v, %v), want its version and %d requests", own, ok, err, linked)
	}
	after := run(3, false)
	if after.Adopted != uint64(linked) || after.Relinked || gatewayRows(3) != 0 {
		t.Errorf("after a run saved its own rows, the next adopted %d (relinked %v) and saved %d, want %d adopted",
			after.Adopted, after.Relinked, gatewayRows(3), linked)
	}
	sameResults(t, "adopted from a run", after, "saved", saving)

	// A link whose digest disagrees with the analysis's (another build's or
	// another endpoint map's rows): the run saves the rows itself, linked
	// again, and finds the same. A fresh link, its rows the newest, read
	// back with its digest changed.
	clock = at(4)
	if _, err := linker.Correlate(ctx, Window{From: from.Add(-margin), To: to.Add(margin)}, 0); err != nil {
		t.Fatal(err)
	}
	store = tamperedLink{db}
	mismatch := run(5, false)
	if mismatch.Adopted != 0 || !mismatch.Relinked || gatewayRows(5) != uint64(linked) {
		t.Fatalf("against a link that disagrees the run adopted %d (relinked %v) and saved %d of %d", mismatch.Adopted,
			mismatch.Relinked, gatewayRows(5), linked)
	}
	sameResults(t, "after a disagreeing link", mismatch, "saved", saving)

	// A link some of whose rows are gone (retention drops partitions):
	// the run does not try to adopt it.
	clock = at(6)
	if _, err := linker.Correlate(ctx, Window{From: from.Add(-margin), To: to.Add(margin)}, 0); err != nil {
		t.Fatal(err)
	}
	store = shortLink{db}
	if gone := run(7, false); gone.Adopted != 0 || gone.Relinked || gatewayRows(7) != uint64(linked) {
		t.Errorf("with a row of the link missing the run adopted %d (relinked %v) and saved %d of %d", gone.Adopted,
			gone.Relinked, gatewayRows(7), linked)
	}
}

// sameResults compares two reports' findings and notification lists.
func sameResults(t *testing.T, an string, a *Report, bn string, b *Report) {
	t.Helper()
	total := 0
	for i := range a.Runs {
		x, y := a.Runs[i], b.Runs[i]
		total += len(x.Findings)
		if len(x.Findings) != len(y.Findings) {
			t.Errorf("%s: %d findings %s, %d %s", x.Run.Analyzer, len(x.Findings), an, len(y.Findings), bn)
			continue
		}
		for j := range x.Findings {
			fx, fy := x.Findings[j], y.Findings[j]
			fx.RunID, fy.RunID = "", ""
			if d := findingDiff(fx, fy); d != "" {
				t.Errorf("%s finding %s (%s, %s): %s", x.Run.Analyzer, fx.ID, an, bn, d)
			}
		}
	}
	if total == 0 {
		t.Fatal("no findings: nothing was compared")
	}
	if !reflect.DeepEqual(a.Reconstruction.Rows, b.Reconstruction.Rows) {
		t.Errorf("notification list differs:\n%s %v\n%s %v", an, listSummary(a.Reconstruction.Rows), bn, listSummary(b.Reconstruction.Rows))
	}
}

// listSummary is a list's rows as role/tier/tenant: requests.
func listSummary(rows []AffectedRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s/%s/%s: %d", r.Role, r.Tier, r.Tenant, r.Requests)
	}
	return out
}

// tamperedLink reads the newest link's record with its digest changed.
type tamperedLink struct{ *chstore.Store }

func (s tamperedLink) LatestFactLink(ctx context.Context) (domain.FactLink, bool, error) {
	l, ok, err := s.Store.LatestFactLink(ctx)
	l.Digest.Lo++
	return l, ok, err
}

// shortLink reads the newest link's record as if it had saved one row
// more than the table holds.
type shortLink struct{ *chstore.Store }

func (s shortLink) LatestFactLink(ctx context.Context) (domain.FactLink, bool, error) {
	l, ok, err := s.Store.LatestFactLink(ctx)
	l.Digest.N++
	return l, ok, err
}
