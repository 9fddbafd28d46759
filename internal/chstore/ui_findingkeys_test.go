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

// SaveFindings writes each finding's lookup keys (finding id, gateway
// request id, each foreign request and a non-zero room), SaveFindingForeign
// the foreign requests it adds to stored findings, and the finding page
// and a request's findings read the newest copy by them. No view writes
// them since migration 0015, so a writer that forgets them fails here.
func TestFindingKeysWrittenWithFindings(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	st := chstore.NewUIStore(s, 0)
	ts := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	finding := func(id, run, req string, room uint64, foreign []string) domain.Finding {
		return domain.Finding{ID: id, RunID: run, Analyzer: "over_threshold", Severity: domain.High, TS: ts, FirstTS: ts, LastTS: ts,
			GatewayRequestID: req, Room: room, ForeignRequestKeys: foreign, Title: "title " + run}
	}
	if err := s.SaveFindings(ctx, []domain.Finding{finding("f-1", "run-0", "req-1", 7, []string{"req-2"})}, ts); err != nil {
		t.Fatal(err)
	}
	later := []domain.Finding{finding("f-1", "run-1", "req-1", 7, []string{"req-2"}), finding("f-2", "run-1", "", 0, nil)}
	if err := s.SaveFindings(ctx, later, ts.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		t.Helper()
		var rows []struct {
			Key string `ch:"key"`
		}
		if err := s.Select(ctx, &rows, "SELECT DISTINCT key FROM finding_keys ORDER BY key"); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range rows {
			got = append(got, k.Key)
		}
		return got
	}
	if got, want := keys(), []string{"b:7", "f:f-1", "f:f-2", "r:req-1", "r:req-2"}; !slices.Equal(got, want) {
		t.Fatalf("finding_keys = %v, want %v (no empty request, no room 0)", got, want)
	}

	d, err := st.Finding(ctx, "f-1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Finding.RunID != "run-1" || d.Finding.Title != "title run-1" {
		t.Fatalf("finding = %+v, want the newest copy (run-1)", d.Finding)
	}
	if _, err := st.Finding(ctx, "f-none"); domain.KindOf(err) != domain.NotFound {
		t.Fatalf("missing finding: err = %v, want NotFound", err)
	}

	// A later reconstruction names f-2's foreign requests: their pages
	// find f-2 by key.
	f2 := later[1]
	f2.ForeignRequestKeys, f2.ForeignTenants = []string{"req-3"}, []string{"beta"}
	if err := s.SaveFindingForeign(ctx, []domain.Finding{f2}); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(), []string{"b:7", "f:f-1", "f:f-2", "r:req-1", "r:req-2", "r:req-3"}; !slices.Equal(got, want) {
		t.Fatalf("after SaveFindingForeign finding_keys = %v, want %v", got, want)
	}
	var ids []struct {
		ID  string `ch:"finding_id"`
		Run string `ch:"run_id"`
	}
	if err := s.Select(ctx, &ids, "SELECT DISTINCT finding_id, run_id FROM finding_keys WHERE key = 'r:req-3'"); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0].ID != "f-2" || ids[0].Run != "run-1" {
		t.Fatalf("findings under r:req-3 = %+v, want f-2 of run-1", ids)
	}
}
