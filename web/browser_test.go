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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/domain"
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
	// One journey may take a few minutes on a busy 2-core machine.
	ctx, cancel3 := context.WithTimeout(ctx, 4*time.Minute)
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

// follow clicks the link with the given id and returns once the browser
// shows the link's target, fully loaded. Waiting for an element is not
// enough here: the page being left has the same table, so a read right
// after the click could see the old page or the new one half parsed.
func follow(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	target := run(t, ctx, chromedp.Evaluate[string](`document.getElementById(`+strconv.Quote(id)+`).href`))
	do(t, ctx, chromedp.Click(chromedp.ID(id)))
	for {
		// Evaluate fails while the old document is torn down; that is a
		// moment of the navigation, not an error, so it is retried.
		at, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === 'complete' ? location.href : ''`))
		if err == nil && at == target {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after clicking #%s the browser is at %q, not %q: %v", id, at, target, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
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
	// The real analyzer, twice: every run stores all its findings, and the
	// UI must show each finding once (the latest run's), as the CLI does.
	cfg := analyze.DefaultConfig()
	for i := 0; i < 2; i++ {
		r := &analyze.Runner{DB: st, Cfg: cfg, Analyzers: analyze.All(cfg), Trigger: "test"}
		if _, err := r.Run(context.Background(), analyze.Window{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := st.LatestFindings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := analyze.LatestAffected(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("simulated, ingested and analyzed twice in %s: %d findings, %d affected rows", time.Since(start), len(cli), len(rec.Rows))
	u := newTestUI(t, st)
	base := u.srv.URL
	ctx := newBrowser(t)
	page := func(name, path string, ready string) {
		t.Helper()
		do(t, ctx, chromedp.Navigate(base+path), chromedp.WaitReady(chromedp.CSS(ready)))
		shot(t, ctx, art, name)
	}
	charts := func() map[string]string {
		return run(t, ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('svg.chart')).map(s => [s.id, s.dataset.series + '/' + s.querySelectorAll('circle, rect, path').length]))`))
	}

	// Responder: overview, findings, a HIGH finding, its request, evidence.
	login(t, ctx, base, "responder-user")
	page("01-overview", "/", "#findings-chart")
	if txt := run(t, ctx, chromedp.Text(chromedp.CSS("main"))); strings.Contains(txt, "1970") {
		t.Error("the overview shows a 1970 time")
	}
	page("02-findings", "/findings", "main")
	_, body := u.api(t, "responder", "GET", "/api/v1/findings?limit=1000", nil)
	var fp FindingPage
	if err := json.Unmarshal(body, &fp); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, f := range fp.Findings {
		ids[f.FindingID] = true
	}
	if fp.Total != uint64(len(cli)) || len(ids) != len(fp.Findings) {
		t.Errorf("UI findings: total %d, %d rows with %d distinct ids; CLI (latest runs) %d", fp.Total, len(fp.Findings), len(ids), len(cli))
	}
	// Foreign tenants come from the reconstruction where the analyzer left
	// them empty: a HIGH finding on a victim names whose data it read.
	withForeign, highs := 0, 0
	for _, f := range fp.Findings {
		if f.Severity == "HIGH" {
			highs++
			if len(f.ForeignTenants) > 0 {
				withForeign++
			}
		}
	}
	if highs == 0 || withForeign == 0 {
		t.Errorf("%d of %d HIGH findings name foreign tenants in the API", withForeign, highs)
	}
	t.Logf("%d of %d HIGH findings name foreign tenants", withForeign, highs)
	var high *analyze.Finding
	for i := range cli {
		if cli[i].Severity == analyze.High && cli[i].GatewayRequestID != "" {
			high = &cli[i]
			break
		}
	}
	if high == nil {
		t.Fatal("the analyzer found no HIGH finding on a request")
	}
	page("03-finding", "/findings/"+url.PathEscape(high.ID), "main")
	if n := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('#sources-table tbody tr, #own-data-only').length`)); n == 0 {
		t.Errorf("finding %s shows no other side", high.ID)
	}
	page("04-request", "/requests/"+url.PathEscape(high.GatewayRequestID), "#timeline")
	shown := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#evidence li')).map(li => li.id)`))
	have := map[string]bool{}
	for _, id := range shown {
		have[id] = true
	}
	for _, l := range high.Evidence {
		if !have[fmt.Sprintf("line-%d", l)] {
			t.Errorf("request page of %s lacks line %d the finding cites", high.GatewayRequestID, l)
		}
	}
	if c := charts()["swimlanes"]; !strings.HasPrefix(c, "3/") && !strings.HasPrefix(c, "4/") {
		t.Errorf("swimlanes chart series/marks = %q, want 3 or 4 lanes", c)
	}
	// Each node's correction named on the page is the clock_offset its
	// sources were ingested with (the simulator skews every engine node).
	wantOffset := map[string]string{}
	for _, s := range keep {
		wantOffset[s.Node] = offsetText(s.ClockOffset)
	}
	offsets := run(t, ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('#clock-offsets .node-offset')).map(s => [s.dataset.node, s.textContent]))`))
	skewed := 0
	for node, txt := range offsets {
		if want, ok := wantOffset[node]; !ok || txt != node+" "+want {
			t.Errorf("request page names %q for %s, its sources were ingested with clock_offset %q", txt, node, want)
		}
		if wantOffset[node] != "none" {
			skewed++
		}
	}
	if len(offsets) < 2 || skewed == 0 {
		t.Errorf("clock offsets on the request page: %v (want the gateway and the skewed engine nodes)", offsets)
	}
	// Ingest corrected every node's skew, so the request's own times show
	// no clock left behind or ahead.
	if d := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.clock-drift')).map(p => p.textContent)`)); len(d) != 0 {
		t.Errorf("request page reports clock drift after correction: %v", d)
	}
	if n := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('#evidence li .clock[data-offset-ns]').length`)); n == 0 {
		t.Error("no evidence line shows its node's own clock")
	}
	evID := run(t, ctx, chromedp.Evaluate[string](`(document.querySelector('#evidence li .clock[data-offset-ns]:not([data-offset-ns="0"])') || document.querySelector('#evidence li')).closest('li').querySelector('a[href^="/evidence/"]').getAttribute('href')`))
	page("05-evidence", evID, "main")
	if !strings.Contains(run(t, ctx, chromedp.Text(chromedp.CSS("main"))), "UTC") {
		t.Error("evidence page has no UTC label")
	}
	if clk := run(t, ctx, chromedp.Text(chromedp.ID("evidence-clock"))); !strings.Contains(clk, "as written in the line; offset ") || strings.Contains(clk, "offset none") {
		t.Errorf("evidence page's clock: %q, want the node's own time and a non-zero offset", clk)
	}
	page("06-search", "/search?tenant="+url.QueryEscape(" "+strings.ToUpper(high.Tenant)+" "), "main")
	if n := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('main table tbody tr').length`)); n == 0 {
		t.Errorf("search for %q (upper case, spaces) found nothing", high.Tenant)
	}
	// Keyset pages: next, then previous returns the same rows, and first.
	page("06b-findings-page-1", "/findings?limit=3", "main")
	firstRows := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('main table tbody tr a[href^="/findings/"]')).map(a => a.getAttribute('href'))`))
	follow(t, ctx, "next-page")
	shot(t, ctx, art, "06c-findings-page-2")
	if n := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('#first-page').length`)); n != 1 {
		t.Error("page 2 of the findings has no first-page link")
	}
	follow(t, ctx, "prev-page")
	back := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('main table tbody tr a[href^="/findings/"]')).map(a => a.getAttribute('href'))`))
	if strings.Join(back, " ") != strings.Join(firstRows, " ") || len(back) == 0 {
		t.Errorf("previous page shows %v, the first page showed %v", back, firstRows)
	}
	page("07-not-found", "/no/such/page", "main")
	if n := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('header nav a').length`)); n == 0 {
		t.Error("the 404 page has no navigation")
	}

	// Compliance: open a case on the incident window; the affected list
	// is the analyzer's, received rows first; the pictures render.
	ctx = newBrowser(t)
	login(t, ctx, base, "compliance-user")
	do(t, ctx, chromedp.Navigate(base+"/cases"), chromedp.WaitVisible(chromedp.ID("case-name")),
		chromedp.SendKeys(chromedp.ID("case-name"), "incident-2026 KV leak"),
	)
	// datetime-local inputs take no keystrokes reliably; set them directly.
	run(t, ctx, chromedp.Evaluate[any](fmt.Sprintf(`document.getElementById('case-from').value = %q; document.getElementById('case-to').value = %q; true`,
		truth.Start.UTC().Format("2006-01-02T15:04:05"), truth.End.UTC().Format("2006-01-02T15:04:05"))))
	do(t, ctx, chromedp.Click(chromedp.ID("case-create")), chromedp.WaitVisible(chromedp.ID("case-title")))
	caseURL := run(t, ctx, chromedp.Location())
	shot(t, ctx, art, "08-case")
	rows := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#affected tbody tr')).map(r => r.dataset.role + '|' + r.querySelector('td.tenant').textContent)`))
	got := map[string][]string{}
	lastRank := 0
	for i, r := range rows {
		role, tn, _ := strings.Cut(r, "|")
		rank := domain.Role(role).Rank()
		if rank < lastRank {
			t.Errorf("row %d (%s) comes after an exposed row: received rows must come first", i, r)
		}
		lastRank = rank
		got[role] = append(got[role], tn)
	}
	// The reconstruction's id is a hash of its content, so the second run
	// stored the same rows again: the page shows each (role, tenant) once.
	want := map[string][]string{}
	distinct := map[string]bool{}
	for _, r := range rec.Rows {
		if k := string(r.Role) + "|" + r.Tenant; !distinct[k] {
			distinct[k] = true
			want[string(r.Role)] = append(want[string(r.Role)], r.Tenant)
		}
	}
	for _, role := range []string{"received", "exposed"} {
		g, w := append([]string(nil), got[role]...), append([]string(nil), want[role]...)
		sort.Strings(g)
		sort.Strings(w)
		if strings.Join(g, ",") != strings.Join(w, ",") {
			t.Errorf("%s tenants on the case page = %v, the analyzer's reconstruction = %v", role, g, w)
		}
	}
	if len(got["received"]) == 0 {
		t.Error("no tenant received foreign data on the case page")
	}
	cs := charts()
	if c := cs["affected-chart"]; c == "" || strings.HasPrefix(c, "0/") {
		t.Errorf("affected chart: %q (charts %v)", c, cs)
	}
	prompt := 0
	for id, c := range cs {
		if strings.HasPrefix(id, "prompt-") {
			prompt++
			if !strings.HasPrefix(c, "4/") && !strings.HasPrefix(c, "3/") {
				t.Errorf("%s: series/marks %q", id, c)
			}
		}
	}
	if prompt == 0 {
		t.Errorf("no prompt-vs-threshold chart on the case page (charts %v)", cs)
	}
	// Tier filter: each tier shows its exposed rows only; all is the default.
	byTier := map[string]int{}
	for _, r := range rec.Rows {
		if r.Role == domain.Exposed {
			byTier[string(r.Tier)]++
		}
	}
	for _, tier := range []string{"confirmed", "likely", "possible"} {
		// From the unfiltered page each time, so the next wait cannot see
		// the previous filter's page.
		do(t, ctx, chromedp.Navigate(caseURL), chromedp.WaitVisible(chromedp.ID("tier-select")))
		run(t, ctx, chromedp.Evaluate[any](fmt.Sprintf(`document.getElementById('tier-select').value = %q; true`, tier)))
		do(t, ctx, chromedp.Click(chromedp.ID("tier-apply")), chromedp.WaitVisible(chromedp.ID("tier-shown")))
		tiers := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#affected tbody tr[data-role]')).map(r => r.dataset.role + '/' + r.dataset.tier)`))
		for _, rt := range tiers {
			if rt != "exposed/"+tier {
				t.Errorf("tier %s shows a %s row", tier, rt)
			}
		}
		if len(tiers) > byTier[tier] {
			t.Errorf("tier %s: %d rows, the reconstruction has at most %d", tier, len(tiers), byTier[tier])
		}
		if len(tiers) > 0 && tier != "possible" {
			shot(t, ctx, art, "08b-case-tier-"+tier)
		}
	}
	do(t, ctx, chromedp.Navigate(caseURL+"?tier=maybe"), chromedp.WaitReady(chromedp.CSS("main")))
	if msg := run(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(msg, "confirmed, likely or possible") {
		t.Errorf("an unknown tier says %q", msg)
	}
	shot(t, ctx, art, "08c-case-bad-tier")
	do(t, ctx, chromedp.Navigate(caseURL), chromedp.WaitVisible(chromedp.ID("case-title")))
	// Victims the list names on no received row are shown, not left out.
	received := map[string]bool{}
	for _, r := range rec.Rows {
		if r.Role == domain.Received {
			for _, k := range r.RequestKeys {
				received[k] = true
			}
		}
	}
	quiet := map[string]bool{}
	for _, f := range cli {
		key := f.RequestKey
		if key == "" {
			key = f.GatewayRequestID
		}
		if min, ok := analyze.VictimSeverity(f.Analyzer); ok && f.Severity.AtLeast(min) && key != "" && !received[key] {
			quiet[key] = true
		}
	}
	shownQuiet := run(t, ctx, chromedp.Evaluate[float64](`document.querySelectorAll('#quiet-victims tbody tr').length`))
	if int(shownQuiet) != len(quiet) {
		t.Errorf("case page lists %v victims without foreign data, the findings and reconstruction give %d", shownQuiet, len(quiet))
	}
	t.Logf("victims without foreign data on the case page: %v", shownQuiet)
	// A form whose CSRF token is stale says it expired and offers a reload.
	run(t, ctx, chromedp.Evaluate[any](`document.querySelector('form[action$="/hold"] input[name=_csrf]').value = 'stale'; true`))
	do(t, ctx, chromedp.Click(chromedp.ID("hold")), chromedp.WaitVisible(chromedp.ID("reload")))
	shot(t, ctx, art, "08d-form-expired")
	if msg := run(t, ctx, chromedp.Text(chromedp.ID("error-message"))); !strings.Contains(msg, "expired") {
		t.Errorf("stale form says %q", msg)
	}
	do(t, ctx, chromedp.Click(chromedp.ID("reload")), chromedp.WaitVisible(chromedp.ID("case-title")))
	if loc := run(t, ctx, chromedp.Location()); strings.TrimSuffix(loc, "?") != caseURL {
		t.Errorf("reload went to %s, want %s", loc, caseURL)
	}
	// An edit with the window's end before its start comes back with the
	// message and the input kept.
	run(t, ctx, chromedp.Evaluate[any](`document.querySelector('#case-edit input[name=window_to]').value = '2020-01-01T00:00:00';
document.querySelector('#case-edit input[name=name]').value = 'edited name kept'; true`))
	do(t, ctx, chromedp.Submit(chromedp.CSS("#case-edit input[name=name]")), chromedp.WaitVisible(chromedp.ID("form-error")))
	shot(t, ctx, art, "08e-case-edit-rejected")
	if v := run(t, ctx, chromedp.Evaluate[string](`document.querySelector('#case-edit input[name=name]').value`)); v != "edited name kept" {
		t.Errorf("the rejected edit lost the input: name %q", v)
	}
	do(t, ctx, chromedp.Navigate(caseURL), chromedp.WaitVisible(chromedp.ID("case-title")))
	// The data table of a chart is one click away.
	do(t, ctx, chromedp.Click(chromedp.CSS("details.chart-data summary")))
	shot(t, ctx, art, "09-case-chart-table")
	page("10-tenant", strings.TrimPrefix(caseURL, base)+"/tenants/"+url.PathEscape(got["received"][0]), "main")
	// The tenant's affected requests come first, received ones before
	// exposed ones, and are marked in the full list.
	sides := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#affected-requests tbody tr')).map(r => r.dataset.role)`))
	if len(sides) == 0 || sides[0] != "received" {
		t.Errorf("tenant view of %s: affected requests %v, want received ones first", got["received"][0], sides)
	}

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
	shot(t, ctx, art, "11-export")
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
	tierSum := 0
	for _, n := range m.ExposedByTier {
		tierSum += n
	}
	if tierSum != m.Exposed {
		t.Errorf("manifest exposed_by_tier %v sums to %d, exposed %d", m.ExposedByTier, tierSum, m.Exposed)
	}
	if _, cb := u.api(t, "compliance", "GET", "/api/v1"+exportPath+"/files/notification.csv", nil); !strings.Contains(strings.SplitN(string(cb), "\n", 2)[0], ",tier,") {
		t.Errorf("CSV header lacks the tier: %.200s", cb)
	}
	wantRows := len(distinct)
	if m.RowCount != uint64(wantRows) || shownRows != fmt.Sprint(wantRows) || m.User != "compliance-user" || m.Filter.ReconstructionID != rec.ID {
		t.Errorf("manifest rows %d (page %s), want %d; user %q; recon %q, want %q", m.RowCount, shownRows, wantRows, m.User, m.Filter.ReconstructionID, rec.ID)
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
		shot(t, ctx, art, fmt.Sprintf("12-xss-%d", i))
	}

	// Admin: the audit log records the journeys' views.
	actx := newBrowser(t)
	login(t, actx, base, "admin-user")
	do(t, actx, chromedp.Navigate(base+"/admin/audit"), chromedp.WaitReady(chromedp.CSS("main")))
	shot(t, actx, art, "13-audit")
	auditText := run(t, actx, chromedp.Text(chromedp.CSS("main")))
	for _, action := range []string{"finding_view", "request_view", "case_view", "export_create", "export_view", "evidence_view"} {
		if !strings.Contains(auditText, action) {
			t.Errorf("audit page lacks %s", action)
		}
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
	h, err := NewServer(Options{Logger: u.testLogger(), DB: st, Store: testStore(st), Posture: testPosture{st}, Auth: u.auth, ExportDir: t.TempDir()})
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

// login signs in through the form as user (password testPassword).
func login(t *testing.T, ctx context.Context, base, user string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), user), chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("whoami")))
	if who := run(t, ctx, chromedp.Text(chromedp.ID("whoami"))); !strings.Contains(who, user) {
		t.Fatalf("logged in as %q, want %s", who, user)
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
