package web

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/simtest"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// The request page of a request whose bootstrap room every concurrent
// request shared (a router deriving rooms from a request id clients leave
// unset), after the real ingest and analysis of such a day: the engine
// lines it shows are its own (its rids', and those its fact lists), not
// the room's other requests', and it shows its shared_room finding.
func TestRequestPageUnderSharedRoom(t *testing.T) {
	ctx := t.Context()
	simDir := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "clean", Seed: 7, Scale: 0.2, Days: 1, OutDir: simDir}); err != nil {
		t.Fatal(err)
	}
	dir := simtest.Rewrite(t, simDir, t.TempDir(), simtest.OneRoom)
	st := testdb.New(t)
	srcs, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.New(st, ingest.Options{}).Ingest(ctx, srcs); err != nil {
		t.Fatal(err)
	}
	cfg := analyze.DefaultConfig()
	rep, err := (&analyze.Runner{DB: st, Cfg: cfg, Analyzers: analyze.All(cfg), Trigger: "test"}).Run(ctx, analyze.Window{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shared *domain.Finding
	for _, x := range rep.Runs {
		for i, f := range x.Findings {
			if x.Run.Analyzer == "shared_room" && f.Severity == domain.High && shared == nil {
				shared = &x.Findings[i]
			}
		}
	}
	if shared == nil {
		t.Fatal("no shared_room finding: the page proves nothing")
	}
	u := newTestUI(t, st)
	code, body := u.api(t, "viewer", "GET", "/api/v1/requests/"+url.PathEscape(shared.GatewayRequestID)+"?tenant="+url.QueryEscape(shared.Tenant), nil)
	if code != 200 {
		t.Fatal(code, string(body))
	}
	var tl Timeline
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatal(err)
	}
	rid := regexp.MustCompile(`\brid='([^']+)'`)
	own := 0
	for _, l := range tl.Lines {
		m := rid.FindStringSubmatch(l.Line)
		if m == nil {
			continue
		}
		if !slices.Contains(shared.RIDs, m[1]) {
			t.Errorf("the page of %s (rids %v) shows a line of rid %s: %.200s", shared.GatewayRequestID, shared.RIDs, m[1], l.Line)
			continue
		}
		own++
	}
	if own < 2 {
		t.Errorf("the page shows %d of the request's own engine lines, want its Receive on each side at least", own)
	}
	if !slices.ContainsFunc(tl.Findings, func(f domain.FindingView) bool { return f.Analyzer == "shared_room" }) {
		t.Errorf("the page does not show the request's shared_room finding: %+v", tl.Findings)
	}
	t.Logf("%s: %d lines shown, %d of them its engine lines", shared.GatewayRequestID, len(tl.Lines), own)
}

// A request whose id another request reused is saved under the id and its
// gateway line (domain.ReusedKey): the request page reads that row, here
// the newer of the two, which names another decode node.
func TestRequestPageReadsAReusedKeysFact(t *testing.T) {
	st := testdb.New(t)
	seed(t, st, 5)
	vts := seedStart.Add(30 * time.Minute)
	mustExec(t, st, `INSERT INTO request_facts (request_key, ts, ts_ns, tenant, model, gateway_request_id, bootstrap_room, prefill_node,
 prefill_rid, prefill_dp_rank, decode_node, decode_rid, decode_dp_rank, line_ids, version)`,
		[]any{domain.ReusedKey(seedRequest, seedLine), vts, uint64(vts.UnixNano()), "victim-co", "m1", seedRequest, seedRoom, "prefill-0",
			"prid", int16(0), "decode-9", "drid", int16(2), []uint64{seedLine, seedLine + 1, seedLine + 2}, uint64(2)})
	u := newTestUI(t, st)
	code, body := u.api(t, "viewer", "GET", "/api/v1/requests/"+seedRequest+"?tenant=victim-co", nil)
	if code != 200 {
		t.Fatal(code, string(body))
	}
	var tl Timeline
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatal(err)
	}
	if tl.DecodeNode != "decode-9" {
		t.Errorf("decode node %q: the page did not read the fact saved under %s", tl.DecodeNode, domain.ReusedKey(seedRequest, seedLine))
	}
}
