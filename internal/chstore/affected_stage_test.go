package chstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// TestAffectedStage folds a list staged over several inserts, with keys
// and lines repeated within and across them, beside a second build of
// the same reconstruction that is discarded: the stored rows have each
// key and line once, sorted, the counts are the distinct keys, the lookup
// rows are there, and neither build leaves staged rows behind.
func TestAffectedStage(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	const keys = 130_000 // more than one insert of anKeyBatch
	st, other := s.StageAffected(), s.StageAffected()
	var wantKeys []string
	for i := range keys {
		wantKeys = append(wantKeys, fmt.Sprintf("req-%06d", i))
	}
	order := slices.Clone(wantKeys)
	order = append(order, wantKeys[:keys/2]...) // repeated across inserts
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, k := range order {
		if err := st.AddKey(ctx, domain.Exposed, "globex", k); err != nil {
			t.Fatal(err)
		}
		if err := other.AddKey(ctx, domain.Exposed, "globex", "other-"+k); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddLines(ctx, domain.Exposed, "globex", []uint64{9, 3, 9, 5}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddKey(ctx, domain.Received, "acme", "victim-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.AddLines(ctx, domain.Received, "acme", []uint64{3}); err != nil {
		t.Fatal(err)
	}
	// A row staged without its scalars is no row of the list.
	if err := st.AddKey(ctx, domain.Exposed, "ghost", "k"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	rows := []domain.AffectedRow{
		{Tenant: "globex", Role: domain.Exposed, Tier: domain.Likely, First: t0, Last: t0.Add(time.Hour),
			Models: []string{"m1", "m2"}, Nodes: []string{"d1"}, Confidence: 0.5, FindingIDs: []string{"f2", "f1"},
			Counterparts: []string{"acme"}, PromptTokens: 300, OutputTokens: 40, RequestKeys: []string{"req-000001", "extra"}},
		{Tenant: "acme", Role: domain.Received, First: t0, Last: t0, Confidence: 0.9, FindingIDs: []string{"f1"},
			Counterparts: []string{"globex"}, Nodes: []string{"d1", "p0"}},
	}
	if err := st.Save(ctx, "rec", "case", t0, rows); err != nil {
		t.Fatal(err)
	}
	if err := other.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	if rows[0].Requests != keys+1 || rows[1].Requests != 1 {
		t.Errorf("Requests %d and %d, want %d and 1", rows[0].Requests, rows[1].Requests, keys+1)
	}
	caseID, got, err := s.AffectedRows(ctx, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if caseID != "case" || len(got) != 2 {
		t.Fatalf("case %q, %d rows; want case and 2", caseID, len(got))
	}
	exposed, received := got[0], got[1]
	if exposed.Role != domain.Exposed {
		exposed, received = received, exposed
	}
	wantExposed := rows[0]
	wantExposed.RequestKeys = append(slices.Clone(wantKeys), "extra")
	slices.Sort(wantExposed.RequestKeys)
	wantExposed.FindingIDs = []string{"f1", "f2"}
	wantExposed.Evidence = []uint64{3, 5, 9}
	if !reflect.DeepEqual(exposed, wantExposed) {
		t.Errorf("exposed row: %d keys (first %q), findings %v, lines %v, requests %d; want %d keys, %v, %v",
			len(exposed.RequestKeys), exposed.RequestKeys[:1], exposed.FindingIDs, exposed.Evidence, exposed.Requests,
			len(wantExposed.RequestKeys), wantExposed.FindingIDs, wantExposed.Evidence)
	}
	wantReceived := rows[1]
	wantReceived.RequestKeys, wantReceived.Evidence, wantReceived.Models = []string{"victim-1"}, []uint64{3}, []string{}
	if !reflect.DeepEqual(received, wantReceived) {
		t.Errorf("received row %+v, want %+v", received, wantReceived)
	}
	var lookups []struct {
		N uint64 `ch:"n"`
	}
	if err := s.Select(ctx, &lookups, `SELECT uniqExact(key, affected_role, tenant) AS n FROM affected_keys WHERE reconstruction_id = 'rec'`); err != nil {
		t.Fatal(err)
	}
	// keys+1 and 1 request keys, two and one finding ids.
	if len(lookups) != 1 || lookups[0].N != keys+1+1+2+1 {
		t.Errorf("lookup rows %+v, want %d", lookups, keys+5)
	}
	var staged []struct {
		N uint64 `ch:"n"`
	}
	if err := s.Select(ctx, &staged, `SELECT count() AS n FROM affected_stage`); err != nil {
		t.Fatal(err)
	}
	if len(staged) != 1 || staged[0].N != 0 {
		t.Errorf("%+v rows left staged, want none", staged)
	}

	// A build a crashed analysis left is dropped once it is stale, and
	// only then.
	left := s.StageAffected()
	for i := range 100_001 { // one insert sent
		if err := left.AddKey(ctx, domain.Exposed, "globex", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	count := func() uint64 {
		t.Helper()
		staged = nil
		if err := s.Select(ctx, &staged, `SELECT count() AS n FROM affected_stage`); err != nil {
			t.Fatal(err)
		}
		return staged[0].N
	}
	// The insert is in flight until the next one or Save: wait for it.
	for deadline := time.Now().Add(10 * time.Second); count() == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.DropStaleStages(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 100_000 {
		t.Fatalf("%d rows staged after a sweep of builds older than an hour, want the fresh build's 100000", n)
	}
	if err := s.DropStaleStages(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d rows staged after a sweep that takes every build as stale", n)
	}
	// The swept build is saved anyway: the stage reads 2 of its 100,002
	// rows (the key still held and the row's scalars), and a list short of
	// requests is not stored.
	defer chstore.SetStageSettle(300 * time.Millisecond)()
	err = left.Save(ctx, "rec-left", "", t0, []domain.AffectedRow{{Tenant: "globex", Role: domain.Exposed, First: t0, Last: t0}})
	if err == nil || !strings.Contains(err.Error(), "reads 2 rows, 100002 were sent") {
		t.Errorf("saving a build whose staged rows are gone: %v, want the stage's count refused", err)
	}
	if _, got, err := s.AffectedRows(ctx, "rec-left"); err != nil || len(got) != 0 {
		t.Errorf("a refused list stored %d rows (%v)", len(got), err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d rows left staged by a refused list", n)
	}
}
