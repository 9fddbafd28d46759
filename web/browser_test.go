package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/parse"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

const chromiumPath = "/usr/bin/chromium"

// Hostile gateway content the browser test ingests through the real
// pipeline. Each payload sets window.pwned if it ever runs.
const (
	xssTenant  = `<script>window.pwned=1</script>`
	xssRequest = `xss-"><img src=x onerror="window.pwned=2">`
	xssModel   = `javascript:window.pwned=3//`
)

func artifactsDir(t *testing.T) string {
	if d := os.Getenv("KVTRAIL_ARTIFACTS"); d != "" {
		d = filepath.Join(d, "web-browser")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv(testdb.EnvRequire) == "1" {
			t.Fatalf("chromium is required: %v", err)
		}
		t.Skipf("no chromium at %s", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.DisableGPU, chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel3)
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

// pwned reads the global every payload would set.
func pwned(t *testing.T, ctx context.Context) any {
	return run(t, ctx, chromedp.Evaluate[any](`window.pwned === undefined ? null : window.pwned`))
}

// TestBrowser drives Debian's chromium through a simulated incident:
// login, a case whose affected tenants match the simulator's truth, a
// request timeline, an export whose manifest digests match the files, and
// hostile log content that never runs (with controls proving the check
// would see it run).
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil && os.Getenv(testdb.EnvRequire) != "1" {
		t.Skipf("no chromium at %s", chromiumPath)
	}
	art := artifactsDir(t)
	st := testdb.New(t)
	start := time.Now()
	simDir := t.TempDir()
	if _, err := simulate.Run(context.Background(), simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.05, OutDir: simDir}); err != nil {
		t.Fatal(err)
	}
	truth, err := simulate.LoadTruth(filepath.Join(simDir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	sources, err := ingest.LoadManifest(filepath.Join(simDir, "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Metrics are not needed here and are most of the ingest time.
	var keep []ingest.Source
	var gw ingest.Source
	for _, s := range sources {
		if s.Format == parse.FormatPrometheus || strings.Contains(s.Path, "/metrics/") {
			continue
		}
		if s.Role == "gateway" {
			gw = s
		}
		keep = append(keep, s)
	}
	hostile := filepath.Join(simDir, "gateway-hostile.jsonl")
	xts := truth.Start.Add(time.Hour).UTC().Format(time.RFC3339Nano)
	line, _ := json.Marshal(map[string]any{"ts": xts, "request_id": xssRequest, "tenant": xssTenant, "model": xssModel, "status": 200,
		"prompt_tokens": 10, "completion_tokens": 1, "bootstrap_room": 77, "gateway": "gw-x"})
	if err := os.WriteFile(hostile, append(append(line, '\n'), []byte("\x1b[31m<script>window.pwned=4</script>\xff\xfe not json\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	gw.Path = hostile
	keep = append(keep, gw)
	if _, err := ingest.New(st, ingest.Options{}).Ingest(context.Background(), keep); err != nil {
		t.Fatal(err)
	}
	// analyze/ has not landed: write the affected list the way it will.
	now := time.Now().UTC().Truncate(time.Second)
	var aff [][]any
	for _, set := range []struct {
		role    string
		tenants []string
	}{{"received_foreign_data", truth.ReceivedForeignData}, {"possibly_exposed", truth.PossiblyExposed}} {
		for _, tn := range set.tenants {
			aff = append(aff, []any{"recon-sim", "", tn, set.role, uint64(1), truth.Start, truth.End, []string{"glm"}, []string{"decode-0"}, 0.9,
				[]string{}, []string{}, now})
		}
	}
	mustExec(t, st, `INSERT INTO affected (reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models,
 nodes, confidence, request_keys, finding_ids, created_at)`, aff...)

	t.Logf("simulated and ingested in %s", time.Since(start))
	u := newTestUI(t, st)
	base := u.srv.URL
	ctx := newBrowser(t)

	// 1. Log in.
	do(t, ctx, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "compliance-user"), chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("whoami")))
	if who := run(t, ctx, chromedp.Text(chromedp.ID("whoami"))); !strings.Contains(who, "compliance-user") {
		t.Fatalf("logged in as %q", who)
	}
	shot(t, ctx, art, "01-overview")

	// 2. Open a case on the incident window; the affected tenants must be
	// the simulator's truth.
	do(t, ctx, chromedp.Navigate(base+"/cases"), chromedp.WaitVisible(chromedp.ID("case-name")),
		chromedp.SendKeys(chromedp.ID("case-name"), "incident-2026 KV leak"),
	)
	// datetime-local inputs take no keystrokes reliably; set them directly.
	run(t, ctx, chromedp.Evaluate[any](fmt.Sprintf(`document.getElementById('case-from').value = %q; document.getElementById('case-to').value = %q; true`,
		truth.Start.UTC().Format("2006-01-02T15:04:05"), truth.End.UTC().Format("2006-01-02T15:04:05"))))
	do(t, ctx, chromedp.Click(chromedp.ID("case-create")), chromedp.WaitVisible(chromedp.ID("case-title")))
	caseURL := run(t, ctx, chromedp.Location())
	rows := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#affected tbody tr')).map(r => r.dataset.role + '|' + r.querySelector('td.tenant').textContent)`))
	got := map[string][]string{}
	for _, r := range rows {
		role, tn, _ := strings.Cut(r, "|")
		got[role] = append(got[role], tn)
	}
	for role, want := range map[string][]string{"received_foreign_data": truth.ReceivedForeignData, "possibly_exposed": truth.PossiblyExposed} {
		w := append([]string(nil), want...)
		sort.Strings(w)
		g := got[role]
		sort.Strings(g)
		if strings.Join(g, ",") != strings.Join(w, ",") || len(w) == 0 {
			t.Errorf("%s tenants on the case page = %v, truth = %v", role, g, w)
		}
	}
	shot(t, ctx, art, "02-case")

	// 3. A request timeline of a truly affected request.
	victim := truth.Affected[0]
	do(t, ctx, chromedp.Navigate(base+"/requests/"+url.PathEscape(victim.RequestID)), chromedp.WaitVisible(chromedp.ID("timeline")))
	counts := run(t, ctx, chromedp.Evaluate[map[string]float64](`({gateway: document.querySelectorAll('.lane-gateway .ev').length,
 prefill: document.querySelectorAll('.lane-prefill .ev').length, decode: document.querySelectorAll('.lane-decode .ev').length,
 evidence: document.querySelectorAll('#evidence li').length, limits: document.querySelectorAll('#limits tbody tr').length})`))
	if counts["gateway"] != 1 || counts["prefill"] == 0 || counts["decode"] == 0 || counts["evidence"] < 3 || counts["limits"] < 2 {
		t.Errorf("timeline of %s: %v", victim.RequestID, counts)
	}
	if tn := run(t, ctx, chromedp.Text(chromedp.ID("req-tenant"))); tn != victim.Tenant {
		t.Errorf("request tenant %q, truth %q", tn, victim.Tenant)
	}
	shot(t, ctx, art, "03-request")

	// 4. Export from the case page and check the manifest against the files.
	do(t, ctx, chromedp.Navigate(caseURL), chromedp.WaitVisible(chromedp.ID("export")), chromedp.Click(chromedp.ID("export")),
		chromedp.WaitVisible(chromedp.ID("export-status")))
	deadline := time.Now().Add(30 * time.Second)
	for run(t, ctx, chromedp.Text(chromedp.ID("export-status"))) != "done" {
		if time.Now().After(deadline) {
			t.Fatal("export did not finish")
		}
		do(t, ctx, chromedp.Sleep(500*time.Millisecond), chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("export-status")))
	}
	do(t, ctx, chromedp.WaitVisible(chromedp.ID("manifest-sha")))
	shot(t, ctx, art, "04-export")
	manifestSHA := run(t, ctx, chromedp.Text(chromedp.ID("manifest-sha")))
	shownRows := run(t, ctx, chromedp.Text(chromedp.ID("manifest-rows")))
	files := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#files tbody tr')).map(r => r.cells[0].textContent + '|' + r.cells[4].textContent)`))
	exportPath := strings.TrimPrefix(run(t, ctx, chromedp.Location()), base)
	files = append(files, "manifest.json|"+manifestSHA)
	for _, f := range files {
		name, sum, _ := strings.Cut(f, "|")
		code, body := u.api(t, "compliance", "GET", "/api/v1"+exportPath+"/files/"+name, nil)
		h := sha256.Sum256(body)
		if code != 200 || hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: status %d, sha256 %x, page shows %s", name, code, h, sum)
		}
	}
	_, mb := u.api(t, "compliance", "GET", "/api/v1"+exportPath+"/files/manifest.json", nil)
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	wantRows := len(truth.ReceivedForeignData) + len(truth.PossiblyExposed)
	if m.RowCount != uint64(wantRows) || shownRows != fmt.Sprint(wantRows) || m.User != "compliance-user" || m.Filter.ReconstructionID != "recon-sim" {
		t.Errorf("manifest rows %d (page %s), want %d; user %q; recon %q", m.RowCount, shownRows, wantRows, m.User, m.Filter.ReconstructionID)
	}

	// 5. Hostile content: no payload runs on any page that shows it.
	caseID := strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(caseURL, base), "?", 2)[0], "/cases/")
	pages := []string{
		"/search?tenant=" + url.QueryEscape(xssTenant),
		"/requests/" + url.PathEscape(xssRequest),
		"/cases/" + caseID + "/tenants/" + url.PathEscape(xssTenant),
		"/",
	}
	for i, p := range pages {
		do(t, ctx, chromedp.Navigate(base+p), chromedp.WaitReady(chromedp.CSS("main")))
		if v := pwned(t, ctx); v != nil {
			t.Errorf("%s: payload ran, window.pwned=%v", p, v)
		}
		shot(t, ctx, art, fmt.Sprintf("05-xss-%d", i))
	}
	do(t, ctx, chromedp.Navigate(base+"/requests/"+url.PathEscape(xssRequest)), chromedp.WaitVisible(chromedp.ID("req-tenant")))
	if tn := run(t, ctx, chromedp.Text(chromedp.ID("req-tenant"))); tn != xssTenant {
		t.Errorf("hostile tenant shown as %q, want the literal text", tn)
	}
	if n := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('main script, main img').length`)); n != 0 {
		t.Errorf("%v script/img elements in main", n)
	}

	// Control 1: the same payload served raw, without CSP, does run — the
	// check above can see execution.
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><main>%s</main>", xssTenant)
	}))
	defer raw.Close()
	do(t, ctx, chromedp.Navigate(raw.URL), chromedp.WaitReady(chromedp.CSS("main")))
	if v := pwned(t, ctx); v != float64(1) {
		t.Fatalf("control: raw payload did not run (window.pwned=%v): the check cannot detect execution", v)
	}
	// Control 2: kvtrail with its CSP header stripped still runs nothing:
	// escaping alone stops the payload; CSP is a second wall.
	h, err := NewServer(Options{Logger: u.testLogger(), DB: st, Conn: st, Auth: u.auth, ExportDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	nocsp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(stripCSP{w}, r)
	}))
	defer nocsp.Close()
	do(t, ctx, chromedp.Navigate(nocsp.URL+"/requests/"+url.PathEscape(xssRequest)), chromedp.WaitReady(chromedp.CSS("main")))
	if v := pwned(t, ctx); v != nil {
		t.Errorf("without CSP the payload ran: window.pwned=%v", v)
	}
	if loc := run(t, ctx, chromedp.Location()); strings.Contains(loc, "/login") {
		t.Errorf("no-CSP server did not accept the session (at %s)", loc)
	}
}

// stripCSP drops the Content-Security-Policy header before it is sent.
type stripCSP struct{ http.ResponseWriter }

func (s stripCSP) WriteHeader(code int) {
	s.Header().Del("Content-Security-Policy")
	s.ResponseWriter.WriteHeader(code)
}

func (s stripCSP) Write(b []byte) (int, error) {
	s.Header().Del("Content-Security-Policy")
	return s.ResponseWriter.Write(b)
}
