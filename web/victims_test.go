package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestQuietVictimsAreShown: victims the notification list names on no
// received row (own data only, or only possible foreign writers) are shown
// on the case page as affected, with which of the two it is; findings that
// do not mark victims, and victims on a received row, are not.
func TestQuietVictimsAreShown(t *testing.T) {
	u := seededUI(t)
	_, body := u.api(t, "compliance", "POST", "/api/v1/cases", map[string]any{"name": "quiet",
		"window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(2 * time.Hour).Format(time.RFC3339)})
	var cs Case
	if err := json.Unmarshal(body, &cs); err != nil || cs.ID == "" {
		t.Fatalf("case: %s", body)
	}
	now := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
	at := seedStart.Add(40 * time.Minute)
	run := func(id, analyzer string) []any {
		return []any{id, analyzer, "1.0.0", "{}", seedStart, at.Add(time.Hour), at, now, now, "SUCCESS", uint32(1), uint32(1), "", "cli", ""}
	}
	mustExec(t, u.store, `INSERT INTO analyzer_runs (run_id, analyzer, version, params, window_from, window_to, watermark, started_at,
 finished_at, status, findings, high, error, trigger, case_id)`,
		run("run-rs", "rejected_served"), run("run-ab", "abort_reuse"), run("run-ot", "over_threshold"))
	finding := func(id, run, analyzer, sev, req, tenant string) []any {
		return []any{id, run, analyzer, "1.0.0", sev, 0.9, at, at, at, req, req, tenant, uint64(0), "prefill-0", "decode-0", int16(0),
			[]string{}, "t", "e", "g", []string{}, []string{}, []uint64{}, []string{}, []string{}, now}
	}
	mustExec(t, u.store, `INSERT INTO findings (finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts, last_ts,
 request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, rids, title, explanation,
 group_key, foreign_tenants, foreign_request_keys, evidence_line_ids, detail_keys, detail_values, created_at)`,
		finding("fv-own", "run-rs", "rejected_served", "HIGH", "req-0005", "acme"),
		finding("fv-poss", "run-rs", "rejected_served", "HIGH", "req-0006", "acme"),
		finding("fv-recv", "run-rs", "rejected_served", "HIGH", seedRequest, "victim-co"),
		finding("fv-abort", "run-ab", "abort_reuse", "MEDIUM", "req-0008", "acme"),
		finding("fv-warn", "run-ot", "over_threshold", "MEDIUM", "req-0007", "acme"), // below over_threshold's victim severity
	)
	aff := func(tenant, role, tier string, keys, findings []string) []any {
		return []any{"recon-q", cs.ID, tenant, role, uint64(1), at, at, []string{"m1"}, []string{"decode-0"}, 0.8, keys, findings, now, tier}
	}
	mustExec(t, u.store, `INSERT INTO affected (reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models,
 nodes, confidence, request_keys, finding_ids, created_at, tier)`,
		aff("victim-co", "received", "", []string{seedRequest}, []string{"fv-recv"}),
		aff("beta", "exposed", "possible", []string{"req-0001"}, []string{"fv-poss"}))

	code, b := u.api(t, "compliance", "GET", "/api/v1/cases/"+cs.ID, nil)
	var v caseView
	if err := json.Unmarshal(b, &v); err != nil || code != http.StatusOK {
		t.Fatalf("case view %d: %s", code, b)
	}
	var got []string
	for _, q := range v.Quiet {
		got = append(got, q.RequestID+":"+map[bool]string{true: "own", false: "possible " + strings.Join(q.Possible, ",")}[q.OwnDataOnly])
	}
	if want := "req-0005:own req-0008:own req-0006:possible beta"; strings.Join(got, " ") != want {
		t.Errorf("affected without foreign data = %v, want %s", got, want)
	}
	code, page := u.api(t, "compliance", "GET", "/cases/"+cs.ID, nil)
	if code != http.StatusOK || strings.Count(string(page), "affected, own data only") != 2 || !strings.Contains(string(page), `id="quiet-victims"`) ||
		strings.Contains(string(page), "req-0007") {
		t.Errorf("case page (%d) does not show the quiet victims as expected:\n%.2000s", code, page)
	}
	// The case's tenant filter applies.
	_, _ = u.api(t, "compliance", "PUT", "/api/v1/cases/"+cs.ID, map[string]any{"name": "quiet", "tenants": []string{"victim-co"},
		"window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(2 * time.Hour).Format(time.RFC3339)})
	_, b = u.api(t, "compliance", "GET", "/api/v1/cases/"+cs.ID, nil)
	v = caseView{}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Quiet) != 0 {
		t.Errorf("with tenants=[victim-co]: %+v (%v)", v.Quiet, err)
	}
}
