package analyze

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/parse"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/simulate"
)

// Correlating in slices (what ingest does) links every gateway-logged
// request exactly as one pass over the whole window (what analyze does):
// same keys, same links, same evidence, in request_facts.
func TestCorrelateInSlicesEqualsOnePass(t *testing.T) {
	ctx := context.Background()
	s, r, d := loadedWhole(t, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.05, Days: 2})
	w := d.Window
	if len(d.Facts) == 0 {
		t.Fatal("no requests in the simulated window: the comparison proves nothing")
	}
	// The one-pass facts, at a lower version than the sliced ones: FINAL
	// shows the sliced build wherever it wrote a key.
	if err := s.SaveRequestFacts(ctx, d.Facts, 1); err != nil {
		t.Fatal(err)
	}
	const digest = `SELECT count(), sum(cityHash64(request_key, tenant, bootstrap_room, prefill_node, prefill_rid, decode_node,
 decode_rid, transfer_failed, corruption, links, arrayStringConcat(arrayMap(x -> toString(x), line_ids), ','))) FROM request_facts FINAL`
	var n1, h1 uint64
	if err := s.QueryRow(ctx, digest).Scan(&n1, &h1); err != nil {
		t.Fatal(err)
	}
	gatewayLogged := 0
	for _, f := range d.Facts {
		if f.GW != nil {
			gatewayLogged++
		}
	}
	// A stray timestamp decades early widens the window; slices are cut
	// where the requests are, so this must still be quick. Slices of an
	// eighth of the requests: the comparison crosses slice edges.
	wide := Window{From: time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC), To: w.To}
	perSlice := gatewayLogged / 8
	buckets, err := s.RequestCounts(ctx, wide.From, wide.To, sliceStep)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(domain.CutWindow(buckets, wide, perSlice)); n < 6 {
		t.Fatalf("the window is linked in %d slices: too few to cross slice edges", n)
	}
	planned := len(domain.CutWindow(buckets, wide, perSlice))
	// The slices are the caller's, or (0) the analysis's own: the link
	// after an ingest takes Config.SliceRequests, and each slice reads the
	// gateway once.
	for _, tc := range []struct {
		name       string
		maxReq     int
		cfgSlices  int
		wantSlices int
	}{
		{"slices given", perSlice, 0, planned},
		{"the analysis's slices", 0, perSlice, planned},
		{"whole window", -1, perSlice, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counted := &gatewayScans{Store: s}
			cfg := r.Cfg
			cfg.SliceRequests = tc.cfgSlices
			rr := &Runner{DB: counted, Cfg: cfg, Trigger: "test"}
			start := time.Now()
			saved, err := rr.Correlate(ctx, wide, tc.maxReq)
			if err != nil {
				t.Fatal(err)
			}
			if saved != gatewayLogged {
				t.Errorf("sliced correlation saved %d facts, one pass built %d for gateway-logged requests", saved, gatewayLogged)
			}
			if counted.n != tc.wantSlices {
				t.Errorf("linked in %d slices (gateway reads), want %d", counted.n, tc.wantSlices)
			}
			var n2, h2 uint64
			if err := s.QueryRow(ctx, digest).Scan(&n2, &h2); err != nil {
				t.Fatal(err)
			}
			if n1 != n2 || h1 != h2 {
				t.Errorf("request_facts after sliced correlation: %d rows (%x), one pass: %d rows (%x)", n2, h2, n1, h1)
			}
			t.Logf("%d requests linked in %d slices in %v over a window from 1971", saved, counted.n, time.Since(start))
		})
	}
}

// gatewayScans counts the gateway reads of a Store: one per slice linked.
type gatewayScans struct {
	Store
	n int
}

func (g *gatewayScans) ScanGatewayResponses(ctx context.Context, w Window, fn func(*GatewayResponse) error) error {
	g.n++
	return g.Store.ScanGatewayResponses(ctx, w, fn)
}

// A slice keeps, from the lines of its link margins, exactly what the
// requests it links need: each links the same parts and lines as in a
// load of the whole window, and the margins' other lines (the traffic
// around the slice) are left out.
//
// The simulated requests' lines end within the slice's context, so only
// the leading margin matters to them. Lines logged later need the
// trailing margin: two are added after the slice's context, a decode
// transfer failure of the slice's last decoded request (the shape of the
// real line in sglang#12688, ingest/parse/testdata/corpus/sglang-12688.log, v0.5.4) and
// the decode Finish of a long decode that started in the slice.
func TestSliceMarginsKeepOnlyLinkedLines(t *testing.T) {
	ctx := context.Background()
	s, r, whole := loadedWhole(t, simulate.Config{Scenario: "incident-2026", Seed: 3, Scale: 0.05, Days: 1})
	from, to := whole.Window.From, whole.Window.To
	mid := from.Add(to.Sub(from) / 2).Truncate(time.Hour)
	own := Window{From: mid, To: mid.Add(time.Hour)}
	late := lastDecodedIn(whole, own)
	if late == nil {
		t.Fatal("no decoded request in the slice to log late lines beside")
	}
	at := own.To.Add(r.Cfg.sliceContext() + r.Cfg.LinkMargin/2)
	long := longDecode{key: "chatcmpl-long-decode", rid: "0c0ffee0long0decode0rid", room: 4242424242424242424,
		start: own.To.Add(-time.Minute), end: at}
	ingestLate(t, s, late, long)
	whole, err := r.Load(ctx, whole.Window)
	if err != nil {
		t.Fatal(err)
	}
	if wf := whole.ByKey[late.Key]; wf == nil || len(wf.Transfer) == 0 || !wf.Transfer[len(wf.Transfer)-1].TS.Equal(at) {
		t.Fatalf("the whole window does not link the late transfer line to request %s: the comparison proves nothing", late.Key)
	}
	if wf := whole.ByKey[long.key]; wf == nil || wf.Decode == nil || wf.Decode.Fin == nil || !wf.Decode.Fin.TS.Equal(at) {
		t.Fatalf("the whole window does not link the long decode's Finish: the comparison proves nothing")
	}
	slice, err := r.loadSlice(ctx, whole, own, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(slice.Facts) == 0 {
		t.Fatal("no requests in the slice: the comparison proves nothing")
	}
	for _, f := range slice.linked {
		wf := whole.ByKey[f.Key]
		if wf == nil {
			t.Fatalf("request %s of the slice is not in the whole window", f.Key)
		}
		if f.Links() != wf.Links() || !slices.Equal(f.Lines(), wf.Lines()) {
			t.Errorf("request %s: slice links %s lines %v, whole window %s %v", f.Key, f.Links(), f.Lines(), wf.Links(), wf.Lines())
		}
	}
	// The slice's span with its margins, read whole.
	c := r.Cfg.sliceContext()
	lo, hi := own.From.Add(-c-r.Cfg.LinkMargin), own.To.Add(c+r.Cfg.LinkMargin)
	all, err := loadEngine(ctx, s, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if len(slice.Engine) >= len(all) {
		t.Errorf("the slice kept %d of the %d engine lines of its span and margins: the margins were not filtered", len(slice.Engine), len(all))
	}
}

// lastDecodedIn is the last request of own in d that a decode node
// linked by room and rid, nil if none.
func lastDecodedIn(d *Dataset, own Window) *Fact {
	var last *Fact
	for _, f := range d.Facts {
		if own.Contains(f.TS) && f.Room != 0 && f.Decode != nil && f.Decode.RID != "" && (last == nil || !f.TS.Before(last.TS)) {
			last = f
		}
	}
	return last
}

// longDecode is a request whose decode node logs its Finish long after
// its start.
type longDecode struct {
	key, rid   string
	room       uint64
	start, end time.Time
}

// ingestLate adds to s, in sources of their own, a decode transfer
// failure of late's room logged at long.end, and the long decode:
// its gateway response, its decode Receive and its decode Finish, on
// late's gateway endpoints and decode node.
func ingestLate(t *testing.T, s *chstore.Store, late *Fact, long longDecode) {
	t.Helper()
	stamp := func(ts time.Time) string { return ts.UTC().Format("2006-01-02 15:04:05") }
	obj := fmt.Sprintf("obj=GenerateReqInput(rid='%s', return_logprob=False, logprob_start_len=-1, top_logprobs_num=0, "+
		"stream=True, log_metrics=True, return_hidden_states=False, bootstrap_host='%s', bootstrap_port=8998, "+
		"bootstrap_room=%d, bootstrap_pair_key=None, data_parallel_rank=None)", long.rid, endpointHost(late.PrefillEP), long.room)
	decode := strings.Join([]string{
		fmt.Sprintf("[%s] Receive: %s", stamp(long.start), obj),
		fmt.Sprintf("[%s] Finish: %s, out={'meta_info': {'id': '%s', 'finish_reason': {'type': 'length', 'length': 32768}, "+
			"'prompt_tokens': 1200, 'weight_version': 'default', 'total_retractions': 0, 'completion_tokens': 32768, "+
			"'cached_tokens': 0, 'e2e_latency': %.1f}}", stamp(long.end), obj, long.rid, long.end.Sub(long.start).Seconds()),
		fmt.Sprintf("[%s DP0 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='%s' "+
			"decode_req.req.bootstrap_room=%d with exception KVTransferError(bootstrap_room=%d): Aborted by AbortReq.",
			stamp(long.end), late.Decode.RID, late.Room, late.Room),
	}, "\n") + "\n"
	gw, err := json.Marshal(map[string]any{"ts": long.start.UTC().Format(time.RFC3339), "request_id": long.key,
		"tenant": late.Tenant, "model": late.Model, "status": 200, "prompt_tokens": 1200, "completion_tokens": 32768,
		"ttft_ms": 400.0, "duration_ms": float64(long.end.Sub(long.start).Milliseconds()),
		"prefill_endpoint": late.PrefillEP, "decode_endpoint": late.DecodeEP, "bootstrap_room": long.room,
		"decode_rid": long.rid, "mode": "pd", "method": "POST", "path": "/v1/chat/completions", "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srcs := []ingest.Source{
		{Path: filepath.Join(dir, "late-decode.log"), Format: parse.FormatSGLang, Node: late.Decode.Node, Role: "decode", Location: time.UTC},
		{Path: filepath.Join(dir, "late-gateway.jsonl"), Format: parse.FormatGateway, Node: "gw-late", Role: "gateway", Location: time.UTC},
	}
	for i, text := range []string{decode, string(gw) + "\n"} {
		if err := os.WriteFile(srcs[i].Path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), srcs); err != nil {
		t.Fatal(err)
	}
}

// loadedWhole simulates and ingests cfg, then loads its whole data span
// as one window.
func loadedWhole(t *testing.T, cfg simulate.Config) (*chstore.Store, *Runner, *Dataset) {
	t.Helper()
	ctx := context.Background()
	s, _ := loaded(t, cfg)
	from, to, _, err := DataSpan(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{DB: s, Cfg: DefaultConfig(), Trigger: "test"}
	d, err := r.Load(ctx, Window{From: from, To: to.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return s, r, d
}
