package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var roleNames = []string{"viewer", "responder", "compliance", "admin"}

// testPassword is every test user's password; testToken(role) is the API
// token of role's test token.
const testPassword = "correct horse battery staple"

func testAuth(t testing.TB) config.Auth {
	t.Helper()
	a := config.Default().Auth
	a.SessionKey = "0123456789abcdef0123456789abcdef-test"
	for _, r := range roleNames {
		ph, _ := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
		a.Users = append(a.Users, config.User{Name: r + "-user", Role: r, PasswordHash: config.Secret(ph)})
		a.Tokens = append(a.Tokens, config.Token{Name: r + "-token", Role: r, TokenHash: config.Secret(apitoken.Hash(testToken(r)))})
	}
	return a
}

type testUI struct {
	srv   *httptest.Server
	store *chstore.Store
	dir   string
	auth  config.Auth
}

func newTestUI(t testing.TB, st *chstore.Store, opts ...func(*Options)) *testUI {
	t.Helper()
	dir := t.TempDir()
	o := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DB: st, Store: testStore(st), Posture: testPosture{st}, Auth: testAuth(t), ExportDir: dir, Version: "test"}
	for _, f := range opts {
		f(&o)
	}
	h, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testUI{srv: srv, store: st, dir: dir, auth: o.Auth}
}

// api calls the API with a role's bearer token.
func (u *testUI) api(t testing.TB, role, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, u.srv.URL+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+testToken(role))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// login signs in through the form and returns a client holding the
// session and the CSRF token.
func (u *testUI) login(t testing.TB, user, password string) (*http.Client, string, int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u.srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("login form has no CSRF token: %s", b)
	}
	resp, err = c.PostForm(u.srv.URL+"/login", url.Values{"username": {user}, "password": {password}, "_csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return c, "", resp.StatusCode
	}
	resp, err = c.Get(u.srv.URL + "/api/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var me struct {
		CSRF string `json:"csrf_token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&me)
	return c, me.CSRF, http.StatusSeeOther
}

// --- seed data: a small incident written straight into the tables ---

var seedStart = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

const (
	seedRoom      = uint64(9_000_000_000_000_000_001) // > 2^63 on purpose: must survive JSON
	seedRequest   = "req-victim"
	seedLine      = uint64(18_000_000_000_000_000_001)
	hostilePrompt = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\"> javascript:alert(1) \x1b[31mred\x1b[0m \xff\xfe"
)

func mustExec(t testing.TB, st *chstore.Store, sql string, rows ...[]any) {
	t.Helper()
	ctx := context.Background()
	b, err := st.PrepareBatch(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			t.Fatalf("append %s: %v", sql, err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatalf("send %s: %v", sql, err)
	}
	if strings.HasPrefix(sql, "INSERT INTO affected (") {
		// Seeded rows bypass SaveAffected, which writes the lookup keys of
		// a reconstruction (migration 0012): derive them as it does.
		// Repeats are harmless (a ReplacingMergeTree, read by key).
		if err := st.Exec(ctx, `INSERT INTO affected_keys (reconstruction_id, key, affected_role, tenant)
SELECT reconstruction_id, key, affected_role, tenant FROM affected
ARRAY JOIN arrayConcat(arrayMap(x -> concat('r:', x), request_keys), arrayMap(x -> concat('f:', x), finding_ids)) AS key`); err != nil {
			t.Fatalf("affected keys of the seeded rows: %v", err)
		}
	}
	if strings.HasPrefix(sql, "INSERT INTO findings (") {
		// The same for findings, whose lookup keys SaveFindings writes
		// (migration 0015).
		if err := st.Exec(ctx, `INSERT INTO finding_keys (key, finding_id, analyzer, ts, run_id)
SELECT key, finding_id, analyzer, ts, run_id FROM findings
ARRAY JOIN arrayFilter(k -> k NOT IN ('r:', 'b:0'), arrayConcat([concat('f:', finding_id), concat('r:', gateway_request_id),
 concat('b:', toString(bootstrap_room))], arrayMap(x -> concat('r:', x), foreign_request_keys))) AS key`); err != nil {
			t.Fatalf("finding keys of the seeded rows: %v", err)
		}
	}
}

// seed writes n requests for tenant acme plus a victim request, its engine
// events, raw lines (one hostile), boots, one finding and an affected list.
func seed(t testing.TB, st *chstore.Store, n int) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	var gw [][]any
	for i := 0; i < n; i++ {
		ts := seedStart.Add(time.Duration(i) * time.Second)
		gw = append(gw, []any{ts.Truncate(time.Second), uint64(ts.UnixNano()), fmt.Sprintf("req-%04d", i), "acme", "m1", uint16(200),
			uint64(1000 + i%7), uint64(10), uint64(0), 1.5, 20.0, "http://p:1", "http://d:1", uint64(1000 + i), "", "", "gw-0", uint64(100 + i), now})
	}
	vts := seedStart.Add(30 * time.Minute)
	gw = append(gw, []any{vts, uint64(vts.UnixNano()), seedRequest, "victim-co", "m1", uint16(200), uint64(700000), uint64(5), uint64(0),
		3.0, 50.0, "http://p:1", "http://d:1", seedRoom, "prid", "drid", "gw-0", seedLine, now})
	mustExec(t, st, `INSERT INTO gateway_responses (ts, ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens,
 cached_tokens, ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, gateway, line_id, ingested_at)`, gw...)
	// id_index as ingest writes it: the request id, room and rids of each line.
	var ids [][]any
	for _, g := range gw {
		ids = append(ids, []any{g[2], "request_id", "gw-0", g[0], g[17]})
	}
	ids = append(ids, []any{strconv.FormatUint(seedRoom, 10), "room", "prefill-0", vts.Add(-2 * time.Second), seedLine + 1},
		[]any{strconv.FormatUint(seedRoom, 10), "room", "decode-0", vts.Add(-time.Second), seedLine + 2},
		[]any{"prid", "rid", "prefill-0", vts.Add(-2 * time.Second), seedLine + 1})
	mustExec(t, st, `INSERT INTO id_index (id, id_kind, node, ts, line_id)`, ids...)
	ev := func(ts time.Time, node, role string, rank int16, event, rid string, room, line uint64) []any {
		return []any{ts.Truncate(time.Second), uint64(ts.UnixNano()), node, role, rank, int16(0), event, rid, room, "", uint32(0),
			uint64(700000), uint64(0), uint64(0), uint64(0), uint64(655034), "", "", uint16(0), 0.0, line, now}
	}
	mustExec(t, st, `INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, tp_rank, event, rid, bootstrap_room, bootstrap_host,
 bootstrap_port, prompt_tokens, completion_tokens, cached_tokens, input_len, limit_tokens, finish_type, finish_message, status_code,
 e2e_latency_ms, line_id, ingested_at)`,
		ev(vts.Add(-2*time.Second), "prefill-0", "prefill", 0, "rejected", "prid", seedRoom, seedLine+1),
		ev(vts.Add(-time.Second), "decode-0", "decode", 2, "received", "drid", seedRoom, seedLine+2),
		ev(vts.Add(-500*time.Millisecond), "decode-0", "decode", 2, "received", "other-rid", 1003, seedLine+3),
	)
	raw := func(ts time.Time, node, line string, id uint64) []any {
		return []any{ts.Truncate(time.Second), uint64(ts.UnixNano()), node, "decode", "sglang", "decode-0.log", "digest", uint64(id % 1000),
			uint64(1), id, "request", "parsed", "", "", uint64(0), line, now}
	}
	mustExec(t, st, `INSERT INTO raw_lines (ts, ts_ns, node, role, log_format, source, file_digest, byte_offset, line_no, line_id, kind,
 parse_status, parse_error, rid, bootstrap_room, line, ingested_at)`,
		raw(vts, "gw-0", `{"request_id":"req-victim"}`, seedLine),
		raw(vts.Add(-2*time.Second), "prefill-0", "Rejected prid: "+hostilePrompt, seedLine+1),
		raw(vts.Add(-time.Second), "decode-0", "Receive drid", seedLine+2),
		raw(vts.Add(-time.Second), "decode-0", strings.Repeat("x", 1<<20), seedLine+9),
		// Carries neither room nor rid: only request_facts links it.
		raw(vts.Add(-2*time.Second), "prefill-0", "Input length (700000 tokens) exceeds the maximum allowed length (655034 tokens)", seedLine+4),
	)
	boot := func(node, role string, ts time.Time, pool uint64) []any {
		return []any{node, role, ts, uint64(ts.UnixNano()), node + "-b1", "0.5.2", "prefill", "mooncake", "/m", uint32(64), uint64(1048576),
			pool, pool - 6, uint64(16384), int64(8192), uint64(64), pool, uint16(8), uint16(2), uint16(1), 0.8, uint8(0),
			[]string{}, []string{}, []uint64{}, uint32(5), now}
	}
	mustExec(t, st, `INSERT INTO node_boots (node, role, boot_ts, boot_ts_ns, boot_id, sglang_version, disaggregation_mode,
 transfer_backend, model_path, page_size, context_len, max_total_num_tokens, max_req_input_len, max_prefill_tokens,
 chunked_prefill_size, max_running_requests, kv_pool_tokens, tp_size, dp_size, pp_size, mem_fraction_static,
 allow_auto_truncate, arg_keys, arg_values, line_ids, facts, ingested_at)`,
		boot("prefill-0", "prefill", seedStart.Add(-time.Hour), 655040), boot("decode-0", "decode", seedStart.Add(-time.Hour), 3145728))
	mustExec(t, st, `INSERT INTO findings (finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts, last_ts,
 request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, rids, title, explanation,
 group_key, foreign_tenants, foreign_request_keys, evidence_line_ids, detail_keys, detail_values, created_at)`,
		[]any{"f-1", "run-1", "rejected_placeholder", "1.0.0", "HIGH", 0.95, vts, vts, vts, seedRequest, seedRequest, "victim-co", seedRoom,
			"prefill-0", "decode-0", int16(2), []string{"prid", "drid"}, "Decode served a rejected prefill", hostilePrompt, "g",
			[]string{"acme"}, []string{"req-0003"}, []uint64{seedLine + 1, seedLine + 2}, []string{}, []string{}, now},
		// The same finding from an earlier run of the analyzer: every run
		// stores all its findings, and only the latest run's are shown.
		[]any{"f-1", "run-0", "rejected_placeholder", "1.0.0", "HIGH", 0.95, vts, vts, vts, seedRequest, seedRequest, "victim-co", seedRoom,
			"prefill-0", "decode-0", int16(2), []string{"prid", "drid"}, "Decode served a rejected prefill", hostilePrompt, "g",
			[]string{"acme"}, []string{"req-0003"}, []uint64{seedLine + 1, seedLine + 2}, []string{}, []string{}, now.Add(-time.Hour)})
	run := func(id string, started time.Time) []any {
		return []any{id, "rejected_placeholder", "1.0.0", "{}", seedStart, vts.Add(time.Hour), vts, started, started, "SUCCESS",
			uint32(1), uint32(1), "", "cli", ""}
	}
	mustExec(t, st, `INSERT INTO analyzer_runs (run_id, analyzer, version, params, window_from, window_to, watermark, started_at,
 finished_at, status, findings, high, error, trigger, case_id)`, run("run-0", now.Add(-time.Hour)), run("run-1", now))
	// request_facts as the correlator writes it: the prefill rejection line
	// carries no room, only the fact links it to the request.
	mustExec(t, st, `INSERT INTO request_facts (request_key, ts, ts_ns, tenant, model, gateway_request_id, bootstrap_room, prefill_node,
 prefill_rid, prefill_dp_rank, decode_node, decode_rid, decode_dp_rank, line_ids, version)`,
		[]any{seedRequest, vts, uint64(vts.UnixNano()), "victim-co", "m1", seedRequest, seedRoom, "prefill-0", "prid", int16(0),
			"decode-0", "drid", int16(2), []uint64{seedLine, seedLine + 1, seedLine + 2, seedLine + 4}, uint64(1)})
	aff := func(tenant, role string) []any {
		return []any{"recon-1", "", tenant, role, uint64(1), vts, vts, []string{"m1"}, []string{"decode-0"}, 0.9,
			[]string{seedRequest}, []string{"f-1"}, now}
	}
	mustExec(t, st, `INSERT INTO affected (reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models,
 nodes, confidence, request_keys, finding_ids, created_at)`,
		aff("victim-co", "received"), aff("acme", "exposed"), aff("=cmd|' /C calc'!A0", "exposed"))
	mustExec(t, st, `INSERT INTO ingest_sources (source_id, path, node, role, log_format, first_ts, last_ts, lines, parsed, unknown,
 malformed, bytes, committed_offset, size, complete, updated_at, version)`,
		[]any{"s1", "/logs/decode-0.log", "decode-0", "decode", "sglang", seedStart, vts, uint64(4), uint64(4), uint64(0), uint64(0),
			uint64(100), uint64(50), uint64(100), uint8(0), now, uint64(1)})
}

func seededUI(t *testing.T) *testUI {
	st := testdb.New(t)
	seed(t, st, 25)
	return newTestUI(t, st)
}

// TestAPIRoutesByRole calls every /api/v1 route with every role's token,
// and without one, and checks who is allowed.
func TestAPIRoutesByRole(t *testing.T) {
	u := seededUI(t)
	code, body := u.api(t, "admin", "POST", "/api/v1/cases", map[string]any{"name": "seed case",
		"window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(2 * time.Hour).Format(time.RFC3339)})
	if code != http.StatusCreated {
		t.Fatalf("create case = %d: %s", code, body)
	}
	var cs Case
	_ = json.Unmarshal(body, &cs)
	code, body = u.api(t, "admin", "POST", "/api/v1/cases/"+cs.ID+"/exports", nil)
	if code != http.StatusAccepted {
		t.Fatalf("export = %d: %s", code, body)
	}
	var ex Export
	_ = json.Unmarshal(body, &ex)
	waitExport(t, u, ex.ID)
	caseBody := map[string]any{"name": "renamed", "window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(time.Hour).Format(time.RFC3339)}

	all := map[string]bool{"viewer": true, "responder": true, "compliance": true, "admin": true}
	writers := map[string]bool{"responder": true, "compliance": true, "admin": true}
	exporters := map[string]bool{"compliance": true, "admin": true}
	admins := map[string]bool{"admin": true}
	tests := []struct {
		method, path string
		body         any
		allowed      map[string]bool
		ok           int
	}{
		{"GET", "/api/v1/me", nil, all, 200},
		{"GET", "/api/v1/overview", nil, all, 200},
		{"GET", "/api/v1/requests?tenant=acme&limit=5", nil, all, 200},
		{"GET", "/api/v1/requests/" + seedRequest, nil, all, 200},
		{"GET", "/api/v1/evidence/" + fmt.Sprint(seedLine+1), nil, all, 200},
		{"GET", "/api/v1/findings", nil, all, 200},
		{"GET", "/api/v1/findings/f-1", nil, all, 200},
		{"GET", "/api/v1/cases", nil, all, 200},
		{"POST", "/api/v1/cases", caseBody, writers, 201},
		{"GET", "/api/v1/cases/" + cs.ID, nil, all, 200},
		{"PUT", "/api/v1/cases/" + cs.ID, caseBody, writers, 200},
		{"GET", "/api/v1/cases/" + cs.ID + "/affected", nil, all, 200},
		{"GET", "/api/v1/cases/" + cs.ID + "/tenants/acme", nil, all, 200},
		{"POST", "/api/v1/cases/" + cs.ID + "/hold", nil, writers, 200},
		// The hold above is released by an admin only (then it is off).
		{"POST", "/api/v1/cases/" + cs.ID + "/release", nil, admins, 200},
		{"POST", "/api/v1/cases/" + cs.ID + "/analyze", nil, writers, 501},
		{"GET", "/api/v1/cases/" + cs.ID + "/exports", nil, exporters, 200},
		{"POST", "/api/v1/cases/" + cs.ID + "/exports", nil, exporters, 202},
		{"GET", "/api/v1/exports/" + ex.ID, nil, exporters, 200},
		{"GET", "/api/v1/exports/" + ex.ID + "/files/notification.csv", nil, exporters, 200},
		{"GET", "/api/v1/audit", nil, admins, 200},
		{"GET", "/api/v1/posture", nil, all, 200},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		for _, role := range append([]string{""}, roleNames...) {
			want := http.StatusForbidden
			switch {
			case role == "":
				want = http.StatusUnauthorized
			case tt.allowed[role]:
				want = tt.ok
			}
			code, body := u.api(t, role, tt.method, tt.path, tt.body)
			if code != want {
				t.Errorf("%s %s as %q = %d, want %d: %.200s", tt.method, tt.path, role, code, want, body)
			}
		}
		covered[tt.method+" "+routeTemplate(tt.path)] = true
	}
	for _, r := range apiRoutes() {
		if !covered[r.Method+" "+r.Path] {
			t.Errorf("route %s %s has no role test", r.Method, r.Path)
		}
	}
	if code, _ := u.api(t, "", "GET", "/api/v1/me", nil); code != 401 {
		t.Errorf("no token = %d", code)
	}
	req, _ := http.NewRequest("GET", u.srv.URL+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("wrong token accepted: %v %v", resp, err)
	}
}

// routeTemplate maps a concrete test path back to its route pattern.
func routeTemplate(p string) string {
	p, _, _ = strings.Cut(p, "?")
	repl := []struct{ re, to string }{
		{`^/api/v1/requests/[^/]+$`, "/api/v1/requests/:id"},
		{`^/api/v1/evidence/[^/]+$`, "/api/v1/evidence/:id"},
		{`^/api/v1/findings/[^/]+$`, "/api/v1/findings/:id"},
		{`^/api/v1/cases/[^/]+/tenants/[^/]+$`, "/api/v1/cases/:id/tenants/:tenant"},
		{`^/api/v1/cases/[^/]+/(affected|hold|release|analyze|exports)$`, "/api/v1/cases/:id/$1"},
		{`^/api/v1/cases/[^/]+$`, "/api/v1/cases/:id"},
		{`^/api/v1/exports/[^/]+/files/.+$`, "/api/v1/exports/:id/files/*name"},
		{`^/api/v1/exports/[^/]+$`, "/api/v1/exports/:id"},
	}
	for _, r := range repl {
		re := regexp.MustCompile(r.re)
		if re.MatchString(p) {
			return re.ReplaceAllString(p, r.to)
		}
	}
	return p
}

func waitExport(t testing.TB, u *testUI, id string) Export {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, body := u.api(t, "admin", "GET", "/api/v1/exports/"+id, nil)
		var e Export
		_ = json.Unmarshal(body, &e)
		if code == 200 && e.Status != "running" {
			if e.Status != "done" {
				t.Fatalf("export %s ended %s: %s", id, e.Status, e.Error)
			}
			return e
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("export %s did not finish", id)
	return Export{}
}

// TestExportManifest checks the files, their digests and that the row
// count equals the affected list the case page shows.
func TestExportManifest(t *testing.T) {
	u := seededUI(t)
	_, body := u.api(t, "compliance", "POST", "/api/v1/cases", map[string]any{"name": "exp",
		"window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(2 * time.Hour).Format(time.RFC3339)})
	var cs Case
	_ = json.Unmarshal(body, &cs)
	_, body = u.api(t, "compliance", "GET", "/api/v1/cases/"+cs.ID+"/affected", nil)
	var list AffectedList
	_ = json.Unmarshal(body, &list)
	if list.Total != 3 || len(list.Rows) != 3 {
		t.Fatalf("affected list = %+v", list)
	}
	_, body = u.api(t, "compliance", "POST", "/api/v1/cases/"+cs.ID+"/exports", nil)
	var ex Export
	_ = json.Unmarshal(body, &ex)
	e := waitExport(t, u, ex.ID)
	m := e.Manifest
	if m.RowCount != list.Total || m.User != "compliance-token" || m.Filter.ReconstructionID != "recon-1" || len(m.AnalyzerVersions["rejected_placeholder"]) != 1 {
		t.Fatalf("manifest = %+v", m)
	}
	if m.Tenants != 3 || len(m.Files) != 2+3 {
		t.Fatalf("files = %+v", m.Files)
	}
	for _, f := range append(m.Files, ManifestFile{Name: "manifest.json", SHA256: e.ManifestSHA256}) {
		code, b := u.api(t, "compliance", "GET", "/api/v1/exports/"+e.ID+"/files/"+f.Name, nil)
		sum := sha256.Sum256(b)
		if code != 200 || hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: status %d, sha %x, manifest says %s", f.Name, code, sum, f.SHA256)
		}
	}
	_, csvb := u.api(t, "compliance", "GET", "/api/v1/exports/"+e.ID+"/files/notification.csv", nil)
	if strings.Contains(string(csvb), "\n=cmd") || !strings.Contains(string(csvb), "'=cmd") {
		t.Errorf("CSV cell starting with = is not neutralised:\n%s", csvb)
	}
	if code, _ := u.api(t, "compliance", "GET", "/api/v1/exports/"+e.ID+"/files/../../etc/passwd", nil); code != 404 {
		t.Errorf("path traversal = %d", code)
	}
	if _, err := os.Stat(filepath.Join(u.dir, e.ID, "manifest.json")); err != nil {
		t.Error(err)
	}
}

// TestSearchKeysetPaging pages through every match and checks no row is
// lost or repeated, in each sort, and that the total is the real count.
func TestSearchKeysetPaging(t *testing.T) {
	u := seededUI(t)
	for _, sort := range []string{"ts_desc", "ts_asc", "prompt_desc", "prompt_asc"} {
		seen := map[string]bool{}
		cursor := ""
		var total uint64
		for i := 0; i < 20; i++ {
			code, body := u.api(t, "viewer", "GET", "/api/v1/requests?tenant=acme&limit=4&sort="+sort+"&cursor="+url.QueryEscape(cursor), nil)
			if code != 200 {
				t.Fatalf("%s: %d %s", sort, code, body)
			}
			var p SearchPage
			_ = json.Unmarshal(body, &p)
			total = p.Total
			for _, r := range p.Rows {
				if seen[r.RequestID] {
					t.Fatalf("%s: %s repeated", sort, r.RequestID)
				}
				seen[r.RequestID] = true
			}
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if total != 25 || len(seen) != 25 {
			t.Errorf("%s: total %d, paged %d, want 25", sort, total, len(seen))
		}
	}
	_, body := u.api(t, "viewer", "GET", "/api/v1/requests?min_prompt=1005&max_prompt=1006", nil)
	var p SearchPage
	_ = json.Unmarshal(body, &p)
	if p.Total != 6 {
		t.Errorf("prompt range total = %d, want 6", p.Total)
	}
	// Trimmed, case-insensitive tenants, and prefixes with "*".
	for q, want := range map[string]uint64{"tenant=%20ACME%20": 25, "tenant=ac*": 25, "tenant=Victim-CO": 1,
		"request_id=req-00*": 25, "request_id=%20req-victim%0A": 1, "tenant=nobody": 0} {
		_, body = u.api(t, "viewer", "GET", "/api/v1/requests?"+q, nil)
		var sp SearchPage
		_ = json.Unmarshal(body, &sp)
		if sp.Total != want {
			t.Errorf("search %s: total %d, want %d", q, sp.Total, want)
		}
	}
	_, body = u.api(t, "viewer", "GET", "/api/v1/requests?rid=drid", nil)
	_ = json.Unmarshal(body, &p)
	if p.Total != 1 || p.Rows[0].RequestID != seedRequest {
		t.Errorf("rid search = %+v", p)
	}
	if !strings.Contains(string(body), `"bootstrap_room":"9000000000000000001"`) {
		t.Errorf("room not carried as an exact string: %s", body)
	}
	for _, bad := range []string{"sort=evil", "status=1 OR 1", "bootstrap_room=-1", "from=yesterday", "cursor=%25%25"} {
		if code, _ := u.api(t, "viewer", "GET", "/api/v1/requests?"+bad, nil); code != 400 {
			t.Errorf("%s = %d, want 400", bad, code)
		}
	}
}

// TestTimelineAndAudit checks the request timeline's parts and that views
// are audited with user, action, parameters and result count.
func TestTimelineAndAudit(t *testing.T) {
	u := seededUI(t)
	code, body := u.api(t, "viewer", "GET", "/api/v1/requests/"+seedRequest+"?context=5", nil)
	if code != 200 {
		t.Fatal(code, string(body))
	}
	var tl Timeline
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatal(err)
	}
	// Four lines: the gateway's, the rejection and the receive (by room and
	// rid), and the length message request_facts links.
	if len(tl.Events) != 3 || len(tl.Lines) != 4 || len(tl.Limits) != 2 || len(tl.Findings) != 1 || tl.DecodeNode != "decode-0" || len(tl.Context) != 2 {
		t.Fatalf("timeline: %d events, %d lines, %d limits, %d findings, decode %q, %d context", len(tl.Events), len(tl.Lines), len(tl.Limits), len(tl.Findings), tl.DecodeNode, len(tl.Context))
	}
	if !strings.Contains(string(body), "exceeds the maximum allowed length") {
		t.Error("the request page misses the line request_facts links to it")
	}
	// Both exposed rows of the seeded reconstruction cite the finding.
	if len(tl.Sources) != 2 || tl.Sources[1].Tenant != "acme" || tl.Sources[1].Role != "exposed" {
		t.Errorf("sources = %+v, want the two exposed tenants from the reconstruction", tl.Sources)
	}
	// The finding is stored by two runs; the list shows the latest run's.
	_, body = u.api(t, "viewer", "GET", "/api/v1/findings", nil)
	var fp FindingPage
	_ = json.Unmarshal(body, &fp)
	if fp.Total != 1 || len(fp.Findings) != 1 || fp.Findings[0].RunID != "run-1" {
		t.Errorf("findings: total %d, %d rows (%+v), want the latest run's one", fp.Total, len(fp.Findings), fp.Findings)
	}
	for _, l := range tl.Limits {
		if l.Node == "prefill-0" && !l.PoolSmaller() {
			t.Error("prefill-0 pool should be smaller than the context")
		}
	}
	// Confidence is entered in percent, as it is shown.
	for q, want := range map[string]uint64{"min_confidence=90": 1, "min_confidence=96%25": 0} {
		_, body = u.api(t, "viewer", "GET", "/api/v1/findings?"+q, nil)
		var fp FindingPage
		_ = json.Unmarshal(body, &fp)
		if fp.Total != want {
			t.Errorf("findings?%s: total %d, want %d", q, fp.Total, want)
		}
	}
	if code, _ := u.api(t, "viewer", "GET", "/api/v1/findings?min_confidence=150", nil); code != 400 {
		t.Errorf("min_confidence=150 = %d, want 400", code)
	}
	// The audit log filters by tenant.
	for q, want := range map[string]uint64{"tenant=victim-co&action=request_view": 1, "tenant=acme&action=request_view": 0} {
		_, body = u.api(t, "admin", "GET", "/api/v1/audit?"+q, nil)
		var ap AuditPage
		_ = json.Unmarshal(body, &ap)
		if ap.Total != want {
			t.Errorf("audit?%s: total %d, want %d", q, ap.Total, want)
		}
	}
	_, body = u.api(t, "admin", "GET", "/api/v1/audit?action=request_view", nil)
	var ap AuditPage
	_ = json.Unmarshal(body, &ap)
	if ap.Total != 1 || ap.Entries[0].User != "viewer-token" || !strings.Contains(ap.Entries[0].Params, seedRequest) || ap.Entries[0].ResultCount != 1 {
		t.Fatalf("audit = %+v", ap)
	}
}

// TestSessionSecurity covers login, cookie flags, CSRF, rate limiting and
// the security headers.
func TestSessionSecurity(t *testing.T) {
	u := seededUI(t)
	c, csrf, code := u.login(t, "responder-user", testPassword)
	if code != http.StatusSeeOther || csrf == "" {
		t.Fatalf("login = %d", code)
	}
	resp, _ := c.Get(u.srv.URL + "/")
	if resp.StatusCode != 200 {
		t.Fatalf("overview = %d", resp.StatusCode)
	}
	for k, want := range map[string]string{"Content-Security-Policy": "script-src 'self'", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if !strings.Contains(resp.Header.Get(k), want) {
			t.Errorf("header %s = %q", k, resp.Header.Get(k))
		}
	}
	resp.Body.Close()
	form := url.Values{"name": {"x"}, "window_from": {"2026-07-01T10:00:00"}, "window_to": {"2026-07-01T11:00:00"}}
	if resp, _ := c.PostForm(u.srv.URL+"/cases", form); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST without CSRF = %d", resp.StatusCode)
	}
	form.Set("_csrf", csrf)
	req, _ := http.NewRequest("POST", u.srv.URL+"/cases", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	if resp, _ := c.Do(req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d", resp.StatusCode)
	}
	if resp, _ := c.PostForm(u.srv.URL+"/cases", form); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("POST with CSRF = %d", resp.StatusCode)
	}
	if resp, _ := c.Get(u.srv.URL + "/admin/audit"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("responder reads audit = %d", resp.StatusCode)
	}
	// Cookie flags.
	jar, _ := cookiejar.New(nil)
	raw := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r1, _ := raw.Get(u.srv.URL + "/login")
	b, _ := io.ReadAll(r1.Body)
	tok := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(b)[1]
	r2, _ := raw.PostForm(u.srv.URL+"/login", url.Values{"username": {"admin-user"}, "password": {testPassword}, "_csrf": {string(tok)}})
	sc := strings.Join(r2.Header.Values("Set-Cookie"), "\n")
	if !strings.Contains(sc, "kvtrail_session=") || !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("session cookie flags: %s", sc)
	}
	// Rate limiting: 5 failures, then 429 even with the right password.
	for i := 0; i < 5; i++ {
		if _, _, code := u.login(t, "viewer-user", "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("bad password %d = %d", i, code)
		}
	}
	if _, _, code := u.login(t, "viewer-user", testPassword); code != http.StatusTooManyRequests {
		t.Errorf("after 5 failures = %d, want 429", code)
	}
	// A forged cookie is refused.
	fj, _ := cookiejar.New(nil)
	su, _ := url.Parse(u.srv.URL)
	fj.SetCookies(su, []*http.Cookie{{Name: "kvtrail_session", Value: "eyJ1IjoiYWRtaW4tdXNlciIsImUiOjk5OTk5OTk5OTl9.AAAA"}})
	fc := &http.Client{Jar: fj, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, _ := fc.Get(u.srv.URL + "/api/v1/me"); resp.StatusCode != 401 {
		t.Errorf("forged cookie = %d", resp.StatusCode)
	}
}

// TestPagesEscapeHostileContent renders every page holding log text and
// checks the payload comes out as text only.
func TestPagesEscapeHostileContent(t *testing.T) {
	u := seededUI(t)
	c, _, _ := u.login(t, "admin-user", testPassword)
	for _, p := range []string{"/requests/" + seedRequest, "/findings/f-1", "/evidence/" + fmt.Sprint(seedLine+1), "/", "/findings", "/search?tenant=victim-co"} {
		resp, err := c.Get(u.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s = %d: %s", p, resp.StatusCode, b)
		}
		s := string(b)
		for _, bad := range []string{"<script", "<img", "onerror=\"", "\x1b", "\xff"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains raw %q", p, bad)
			}
		}
	}
	resp, _ := c.Get(u.srv.URL + "/requests/" + seedRequest)
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "&lt;script&gt;window.pwned=1&lt;/script&gt;") || !strings.Contains(string(b), `\x1b[31mred`) {
		t.Errorf("payload not shown as escaped text")
	}
	if strings.Count(string(b), "x") > 10*maxShownLine && strings.Contains(string(b), strings.Repeat("x", 1<<20)) {
		t.Errorf("megabyte line rendered whole in the timeline")
	}
}

// TestOpenAPIDocumentsEveryRoute checks openapi.yaml names every API route.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	b, err := openapiFS.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, r := range apiRoutes() {
		p := regexp.MustCompile(`[:*](\w+)`).ReplaceAllString(r.Path, "{$1}")
		p = strings.TrimPrefix(p, "/api/v1")
		if !strings.Contains(doc, "\n  "+p+":") {
			t.Errorf("openapi.yaml lacks path %s", p)
			continue
		}
		section := doc[strings.Index(doc, "\n  "+p+":"):]
		if next := regexp.MustCompile(`\n  /`).FindStringIndex(section[3:]); next != nil {
			section = section[:next[0]+3]
		}
		if !strings.Contains(section, "\n    "+strings.ToLower(r.Method)+":") {
			t.Errorf("openapi.yaml lacks %s %s", r.Method, p)
		}
	}
}

func (u *testUI) testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestInterruptedExport: an export whose instance stopped (no heartbeat
// for exportStaleAfter) reads as interrupted, not running forever; one
// heard from recently still reads as running.
func TestInterruptedExport(t *testing.T) {
	u := seededUI(t)
	ctx := context.Background()
	st := testStore(u.store)
	now := time.Now().UTC()
	for _, tt := range []struct {
		id, want string
		last     time.Time
	}{
		{"exp-stale", "interrupted", now.Add(-exportStaleAfter - time.Minute)},
		{"exp-alive", "running", now.Add(-exportHeartbeat)},
	} {
		e := Export{ID: tt.id, CaseID: "case-x", RequestedBy: "compliance", CreatedAt: now.Add(-time.Hour), Status: "running", Version: uint64(tt.last.UnixNano())}
		if err := st.SaveExport(ctx, e); err != nil {
			t.Fatal(err)
		}
		code, body := u.api(t, "compliance", "GET", "/api/v1/exports/"+tt.id, nil)
		var got Export
		if err := json.Unmarshal(body, &got); err != nil || code != 200 {
			t.Fatalf("%s: %d %s", tt.id, code, body)
		}
		if got.Status != tt.want {
			t.Errorf("%s last heard of %v ago: status %q, want %q", tt.id, now.Sub(tt.last).Round(time.Second), got.Status, tt.want)
		}
		if (tt.want == "interrupted") != strings.Contains(got.Error, "stopped before it finished") {
			t.Errorf("%s: error %q", tt.id, got.Error)
		}
	}
}
