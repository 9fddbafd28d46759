package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The UI store's writes read back through its reads: a case's newest
// version wins, the audit log filters by tenant and pages newest first,
// an export keeps its manifest and digest, and a missing row is NotFound.
func TestUIStoreRoundTrips(t *testing.T) {
	ctx := context.Background()
	st := chstore.NewUIStore(testdb.New(t), 10*time.Minute)
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

	c := domain.Case{ID: "case-1", Name: "first", From: t0, To: t0.Add(time.Hour), Status: "open",
		Filters: domain.CaseFilters{Tenants: []string{"initech"}}, CreatedBy: "alice", CreatedAt: t0, UpdatedAt: t0, Version: 1}
	if err := st.SaveCase(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Name, c.LegalHold, c.Version, c.UpdatedAt = "renamed", true, 2, t0.Add(time.Minute)
	if err := st.SaveCase(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetCase(ctx, "case-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || !got.LegalHold || got.Version != 2 || len(got.Filters.Tenants) != 1 || got.Filters.Tenants[0] != "initech" {
		t.Fatalf("case = %+v, want the newest version with its filters", got)
	}
	if _, err := st.GetCase(ctx, "case-none"); domain.KindOf(err) != domain.NotFound {
		t.Fatalf("missing case: err = %v, want NotFound", err)
	}
	cases, err := st.ListCases(ctx)
	if err != nil || len(cases) != 1 {
		t.Fatalf("cases = %+v, %v; want one (versions fold)", cases, err)
	}

	for i, tenant := range []string{"initech", "acme", "initech"} {
		e := domain.AuditEntry{TS: t0.Add(time.Duration(i) * time.Second), TSNS: uint64(t0.Add(time.Duration(i) * time.Second).UnixNano()),
			User: "alice", Role: "responder", Action: "request.view", Params: `{"tenant":"` + tenant + `"}`, Status: 200}
		if err := st.WriteAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	page, err := st.ListAudit(ctx, domain.AuditQuery{Tenant: "initech", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 2 || len(page.Entries) != 1 || page.Next == "" || !page.Entries[0].TS.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("audit page = %+v, want 2 initech entries, the newest first, and a next cursor", page)
	}

	m := &domain.ExportManifest{ExportID: "exp-1", CaseID: "case-1", RowCount: 3,
		Files: []domain.ExportFile{{Name: "affected.csv", Bytes: 10, SHA256: "abc"}}}
	e := domain.Export{ID: "exp-1", CaseID: "case-1", RequestedBy: "alice", CreatedAt: t0, Status: "done", Rows: 3,
		Manifest: m, ManifestSHA256: "def", Version: 1}
	if err := st.SaveExport(ctx, e); err != nil {
		t.Fatal(err)
	}
	ge, err := st.GetExport(ctx, "exp-1")
	if err != nil {
		t.Fatal(err)
	}
	if ge.Status != "done" || ge.Manifest == nil || ge.Manifest.RowCount != 3 || ge.ManifestSHA256 != "def" || len(ge.Manifest.Files) != 1 {
		t.Fatalf("export = %+v, want its manifest and digest back", ge)
	}
	if _, err := st.GetExport(ctx, "exp-none"); domain.KindOf(err) != domain.NotFound {
		t.Fatalf("missing export: err = %v, want NotFound", err)
	}
}
