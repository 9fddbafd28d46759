package web

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// TestTierFilter: the case's list and the API filter exposed rows by tier
// (?tier=, default all, most certain first), an unknown tier is a 400 that
// names the three, and exports carry the tier in every file and the
// manifest.
func TestTierFilter(t *testing.T) {
	u := seededUI(t)
	_, body := u.api(t, "compliance", "POST", "/api/v1/cases", map[string]any{"name": "tiers",
		"window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(2 * time.Hour).Format(time.RFC3339)})
	var cs Case
	if err := json.Unmarshal(body, &cs); err != nil || cs.ID == "" {
		t.Fatalf("case: %s", body)
	}
	vts := seedStart.Add(30 * time.Minute)
	now := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
	aff := func(tenant, role, tier string, counterparts ...string) []any {
		return []any{"recon-tiers", cs.ID, tenant, role, uint64(1), vts, vts, []string{"m1"}, []string{"decode-0"}, 0.8,
			[]string{seedRequest}, []string{"f-1"}, now, tier, append([]string{}, counterparts...)}
	}
	// Stored in key order (role, tenant), which is not the order of
	// certainty: the page must sort.
	mustExec(t, u.store, `INSERT INTO affected (reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models,
 nodes, confidence, request_keys, finding_ids, created_at, tier, counterparts)`,
		aff("a-possible", "exposed", "possible", "victim-co"), aff("b-likely", "exposed", "likely", "victim-co"),
		aff("c-confirmed", "exposed", "confirmed", "victim-co"), aff("d-likely", "exposed", "likely", "victim-co"),
		aff("victim-co", "received", "", "b-likely", "c-confirmed"))

	list := func(q string) (int, AffectedList, string) {
		t.Helper()
		code, b := u.api(t, "compliance", "GET", "/api/v1/cases/"+cs.ID+"/affected"+q, nil)
		var l AffectedList
		if code == http.StatusOK {
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatal(err)
			}
		}
		return code, l, string(b)
	}
	order := func(l AffectedList) string {
		var s []string
		for _, r := range l.Rows {
			s = append(s, string(r.Role)+":"+string(r.Tier)+":"+r.Tenant)
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		q, want string
	}{
		{"", "received::victim-co exposed:confirmed:c-confirmed exposed:likely:b-likely exposed:likely:d-likely exposed:possible:a-possible"},
		{"?tier=all", "received::victim-co exposed:confirmed:c-confirmed exposed:likely:b-likely exposed:likely:d-likely exposed:possible:a-possible"},
		{"?tier=likely", "exposed:likely:b-likely exposed:likely:d-likely"},
		{"?tier=%20Confirmed", "exposed:confirmed:c-confirmed"},
		{"?tier=possible", "exposed:possible:a-possible"},
	} {
		code, l, b := list(tc.q)
		if code != http.StatusOK || order(l) != tc.want {
			t.Errorf("%s: %d %q, want %q (%.200s)", tc.q, code, order(l), tc.want, b)
		}
		if l.Total != 5 || l.Shown != len(l.Rows) || l.ByTier[domain.Confirmed] != 1 || l.ByTier[domain.Likely] != 2 || l.ByTier[domain.Possible] != 1 {
			t.Errorf("%s: total %d shown %d by tier %v", tc.q, l.Total, l.Shown, l.ByTier)
		}
	}
	for _, path := range []string{"/api/v1/cases/" + cs.ID + "/affected?tier=maybe", "/api/v1/cases/" + cs.ID + "?tier=maybe",
		"/cases/" + cs.ID + "?tier=maybe"} {
		code, b := u.api(t, "compliance", "GET", path, nil)
		if code != http.StatusBadRequest || !strings.Contains(string(b), "confirmed, likely or possible") {
			t.Errorf("%s = %d %.300s, want 400 naming the tiers", path, code, b)
		}
	}
	// The page: filter form, rows of the tier only, and what is hidden.
	code, page := u.api(t, "compliance", "GET", "/cases/"+cs.ID+"?tier=likely", nil)
	if code != http.StatusOK || strings.Count(string(page), `data-tier="likely"`) != 2 || strings.Contains(string(page), `data-tier="confirmed"`) ||
		!strings.Contains(string(page), `id="tier-shown"`) || !strings.Contains(string(page), `<option value="likely" selected>`) ||
		!strings.Contains(string(page), `name="tier" value="likely"`) {
		t.Errorf("case page with tier=likely: %d\n%.3000s", code, page)
	}

	// Exports: the whole list, then the likely rows only.
	export := func(q string) (Export, [][]string, []AffectedRow) {
		t.Helper()
		code, b := u.api(t, "compliance", "POST", "/api/v1/cases/"+cs.ID+"/exports"+q, nil)
		var ex Export
		if err := json.Unmarshal(b, &ex); err != nil || code != http.StatusAccepted {
			t.Fatalf("export%s: %d %s", q, code, b)
		}
		e := waitExport(t, u, ex.ID)
		_, cb := u.api(t, "compliance", "GET", "/api/v1/exports/"+e.ID+"/files/notification.csv", nil)
		recs, err := csv.NewReader(strings.NewReader(string(cb))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		_, jb := u.api(t, "compliance", "GET", "/api/v1/exports/"+e.ID+"/files/notification.json", nil)
		var rows []AffectedRow
		if err := json.Unmarshal(jb, &rows); err != nil {
			t.Fatal(err)
		}
		return e, recs, rows
	}
	e, recs, rows := export("")
	m := e.Manifest
	if m.RowCount != 5 || m.Filter.Tier != "" || m.ExposedByTier[domain.Likely] != 2 || m.ExposedByTier[domain.Confirmed] != 1 || len(rows) != 5 {
		t.Errorf("full export manifest: rows %d tier %q by tier %v; json rows %d", m.RowCount, m.Filter.Tier, m.ExposedByTier, len(rows))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	tiers := map[string]string{}
	for _, r := range recs[1:] {
		tiers[r[col["tenant"]]] = r[col["tier"]]
	}
	if _, ok := col["tier"]; !ok || tiers["c-confirmed"] != "confirmed" || tiers["a-possible"] != "possible" || tiers["victim-co"] != "" {
		t.Errorf("CSV header %v, tiers %v", recs[0], tiers)
	}
	if recs[1:][0][col["counterparts"]] == "" {
		t.Errorf("CSV counterparts empty: %v", recs[1])
	}
	e, recs, rows = export("?tier=likely")
	m = e.Manifest
	if m.RowCount != 2 || m.Filter.Tier != domain.Likely || m.Received != 0 || m.Exposed != 2 || m.ExposedByTier[domain.Likely] != 2 ||
		len(recs) != 3 || len(rows) != 2 || m.Tenants != 2 || len(m.Files) != 2+2 {
		t.Errorf("likely export: manifest %+v, %d CSV records, %d JSON rows", m, len(recs), len(rows))
	}
	if _, page := u.api(t, "compliance", "GET", "/exports/"+e.ID, nil); !strings.Contains(string(page), `id="manifest-tier">exposed rows of tier likely only`) {
		t.Errorf("export page does not name the tier filter:\n%.2000s", page)
	}
	for _, r := range rows {
		if r.Tier != domain.Likely {
			t.Errorf("likely export holds %s at tier %q", r.Tenant, r.Tier)
		}
	}
	if code, b := u.api(t, "compliance", "POST", "/api/v1/cases/"+cs.ID+"/exports?tier=maybe", nil); code != http.StatusBadRequest {
		t.Errorf("export with an unknown tier = %d %s", code, b)
	}
}
