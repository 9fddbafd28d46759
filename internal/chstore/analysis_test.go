package chstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

var anT0 = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

func ns(t time.Time) uint64 { return uint64(t.UnixNano()) }

// TestAnalysisEvidenceReads: the analysis' reads return the stored rows as
// domain types, in the order the replays rely on, each line once, only
// inside the range asked for; a callback's error ends a stream and comes
// back unchanged.
func TestAnalysisEvidenceReads(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()

	sp, err := s.AnalysisDataSpan(ctx)
	if err != nil || !sp.From.IsZero() || !sp.To.IsZero() {
		t.Fatalf("empty database: span %+v, %v; want zero", sp, err)
	}

	at := func(sec int) time.Time { return anT0.Add(time.Duration(sec)*time.Second + 250*time.Millisecond) }
	engine := `INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, finish_type, line_id, ingested_at)`
	batch(t, s, engine, [][]any{
		{at(5), ns(at(5)), "d1", "decode", int16(1), "received", "r1", uint64(7), uint64(100), uint64(0), "", uint64(11), anT0},
		{at(5), ns(at(5)), "d1", "decode", int16(1), "received", "r1", uint64(7), uint64(100), uint64(0), "", uint64(11), anT0}, // stored twice
		{at(9), ns(at(9)), "d1", "decode", int16(1), "finished", "r1", uint64(7), uint64(100), uint64(20), "stop", uint64(12), anT0},
		{at(2), ns(at(2)), "d0", "decode", int16(0), "received", "r0", uint64(8), uint64(50), uint64(0), "", uint64(10), anT0},
		{at(3), ns(at(3)), "p0", "prefill", int16(0), "received", "r0", uint64(8), uint64(50), uint64(0), "", uint64(9), anT0},
		{at(4), ns(at(4)), "p0", "prefill", int16(0), "http_access", "", uint64(0), uint64(0), uint64(0), "", uint64(8), anT0},
		{at(7200), ns(at(7200)), "d1", "decode", int16(1), "received", "r9", uint64(70), uint64(1), uint64(0), "", uint64(99), anT0.Add(time.Minute)},
	})
	// A second part, as a later ingest leaves it: a copy of line 9 and a
	// line of the same nanosecond as line 11 with a lower id. The reads are
	// unordered and sorted in Go, so order across parts is theirs to keep.
	batch(t, s, engine, [][]any{
		{at(5), ns(at(5)), "p0", "prefill", int16(0), "finished", "r5", uint64(5), uint64(10), uint64(0), "stop", uint64(6), anT0},
		{at(3), ns(at(3)), "p0", "prefill", int16(0), "received", "r0", uint64(8), uint64(50), uint64(0), "", uint64(9), anT0},
	})
	gateway := `INSERT INTO gateway_responses (ts, ts_ns, request_id, tenant, model, status, prompt_tokens, ttft_ms,
 duration_ms, bootstrap_room, decode_endpoint, line_id, ingested_at)`
	batch(t, s, gateway, [][]any{
		{at(1), ns(at(1)), "q1", "acme", "m", uint16(200), uint64(100), 12.5, 300.0, uint64(7), "http://10.0.0.2:30000", uint64(21), anT0},
		{at(1), ns(at(1)), "q1", "acme", "m", uint16(200), uint64(100), 12.5, 300.0, uint64(7), "http://10.0.0.2:30000", uint64(21), anT0},
		{at(3600), ns(at(3600)), "q2", "initech", "m", uint16(200), uint64(5), 1.0, 2.0, uint64(8), "", uint64(22), anT0},
	})
	// Another part: q0 in the same nanosecond as q1 (a higher line id, a
	// lower request id: it comes first) and a third copy of q1.
	batch(t, s, gateway, [][]any{
		{at(1), ns(at(1)), "q1", "acme", "m", uint16(200), uint64(100), 12.5, 300.0, uint64(7), "http://10.0.0.2:30000", uint64(21), anT0},
		{at(1), ns(at(1)), "q0", "acme", "m", uint16(200), uint64(3), 1.5, 3.0, uint64(5), "", uint64(23), anT0},
	})

	// Engine lines: time order, http_access left out, a duplicate once.
	var got []uint64
	if err := s.ScanEngineEvents(ctx, anT0, anT0.Add(time.Hour), func(e *domain.EngineEvent) error {
		got = append(got, e.Line)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{10, 9, 6, 11, 12}; !reflect.DeepEqual(got, want) {
		t.Fatalf("engine lines %v, want %v", got, want)
	}
	// Transfer lines: time order, then line; a line stored twice (here by
	// two inserts, two parts, as a re-ingest leaves it) once.
	transfer := `INSERT INTO transfer_events (ts, ts_ns, node, role, dp_rank, source, event, rid, bootstrap_room,
 line_id, ingested_at)`
	tr := func(sec int, line uint64) []any {
		return []any{at(sec), ns(at(sec)), "p0", "prefill", int16(0), "sglang", "transfer_failed", "r0", uint64(8), line, anT0}
	}
	batch(t, s, transfer, [][]any{tr(6, 32), tr(6, 31), tr(2, 33)})
	batch(t, s, transfer, [][]any{tr(6, 31), tr(6, 32)})
	got = nil
	if err := s.ScanTransferEvents(ctx, anT0, anT0.Add(time.Hour), func(e *domain.TransferEvent) error {
		got = append(got, e.Line)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{33, 31, 32}; !reflect.DeepEqual(got, want) {
		t.Fatalf("transfer lines %v, want %v", got, want)
	}
	// Decode lines: the nodes, then each node's in time order; a line
	// stored twice comes twice.
	got = nil
	nodes, err := s.DecodeNodes(ctx, anT0, anT0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		if err := s.ScanDecodeNodeLines(ctx, anT0, anT0.Add(time.Hour), node, func(e *domain.EngineEvent) error {
			got = append(got, e.Line)
			if e.Node != node {
				t.Errorf("line %d of node %s in the stream of %s", e.Line, e.Node, node)
			}
			if e.Line == 12 && (e.Completion != 20 || e.FinishType != "stop" || !e.TS.Equal(at(9))) {
				t.Errorf("finish line read as %+v", e)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []uint64{10, 11, 11, 12}; !reflect.DeepEqual(got, want) {
		t.Fatalf("decode lines %v, want %v", got, want)
	}
	stop := errors.New("enough")
	n := 0
	err = s.ScanEngineEvents(ctx, anT0, anT0.Add(time.Hour), func(*domain.EngineEvent) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("a callback's error: got %v after %d rows, want %v after 1", err, n, stop)
	}

	// Gateway responses: [From, To) at nanosecond precision, each once.
	var gw []*domain.GatewayResponse
	if err := s.ScanGatewayResponses(ctx, domain.Window{From: anT0, To: at(3600)}, func(g *domain.GatewayResponse) error {
		gw = append(gw, g)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(gw) != 2 || gw[0].RequestID != "q0" || gw[1].RequestID != "q1" || gw[1].TTFTMs != 12.5 ||
		gw[1].DurationMs != 300 || gw[1].Room != 7 {
		t.Fatalf("gateway responses %+v, want q0, then q1 once with its ttft, duration and room", gw)
	}
	owners, err := s.RoomOwners(ctx, []uint64{8, 99})
	if err != nil || len(owners) != 1 || owners[0].RequestID != "q2" || owners[0].Tenant != "initech" {
		t.Fatalf("room owners %+v, %v; want q2 of initech (room 8, outside any window)", owners, err)
	}

	// Gateway responses per hour (the engine line of the third hour is
	// not a response): q0 and q1, stored three times until merged, then q2.
	counts, err := s.RequestCounts(ctx, anT0, anT0.Add(3*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || !counts[0].Start.Equal(anT0) || counts[0].N < 2 || counts[0].N > 4 ||
		!counts[1].Start.Equal(anT0.Add(time.Hour)) || counts[1].N != 1 {
		t.Fatalf("request counts %+v, want q1 in the first hour and q2 in the second", counts)
	}

	sp, err = s.AnalysisDataSpan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (domain.DataSpan{From: anT0.Add(time.Second), To: anT0.Add(7201 * time.Second), Watermark: anT0.Add(time.Minute)}); sp != want {
		t.Fatalf("data span %+v, want %+v", sp, want)
	}
}

// TestAnalysisBootsPagesProbes: boots come back linked per node, page
// events lane by lane, probe verdicts with the probes that sent their
// foreign markers.
func TestAnalysisBootsPagesProbes(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	batch(t, s, `INSERT INTO node_boots (node, role, boot_ts, boot_ts_ns, boot_id, sglang_version, page_size,
 context_len, max_req_input_len, dp_size, arg_keys, arg_values, line_ids, facts, ingested_at)`, [][]any{
		{"d1", "decode", anT0, ns(anT0), "b1", "0.5.2", uint32(16), uint64(8192), uint64(8186), uint16(2),
			[]string{"host"}, []string{"'10.0.0.2'"}, []uint64{1}, uint32(3), anT0},
		{"d1", "decode", anT0.Add(time.Hour), ns(anT0.Add(time.Hour)), "b2", "0.5.2", uint32(0), uint64(0), uint64(0),
			uint16(0), []string{}, []string{}, []uint64{2}, uint32(1), anT0},
	})
	bs, err := s.NodeBoots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list := bs.ByNode["d1"]
	if len(list) != 2 || list[0].Next != list[1] || list[1].Next != nil {
		t.Fatalf("boots of d1: %+v, want two linked in time order", list)
	}
	if b := list[0]; b.Host() != "10.0.0.2" || !b.HasLimits || b.PageSize != 16 || b.DPSize != 2 || b.Limit() != 8186 {
		t.Fatalf("first boot read as %+v", b)
	}
	if b := list[1]; b.HasLimits || b.HasPage || b.DPSize != 1 {
		t.Fatalf("second boot (no limits logged) read as %+v", b)
	}
	if bs.At("d1", anT0.Add(30*time.Minute)) != list[0] {
		t.Fatal("boot in force half an hour in is not the first")
	}

	batch(t, s, `INSERT INTO page_events (ts, ts_ns, node, dp_rank, event, rid, bootstrap_room, pages, line_id, ingested_at)`, [][]any{
		{anT0.Add(2 * time.Second), ns(anT0.Add(2 * time.Second)), "d1", int16(1), "write", "a", uint64(5), []uint32{1, 2}, uint64(31), anT0},
		{anT0.Add(time.Second), ns(anT0.Add(time.Second)), "d1", int16(0), "read", "b", uint64(6), []uint32{3}, uint64(32), anT0},
		{anT0.Add(time.Second), ns(anT0.Add(time.Second)), "d1", int16(1), "write", "c", uint64(4), []uint32{1}, uint64(30), anT0},
	})
	nodes, err := s.PageEventNodes(ctx)
	if err != nil || !reflect.DeepEqual(nodes, []string{"d1"}) {
		t.Fatalf("page event nodes %v, %v; want [d1]", nodes, err)
	}
	var lines []uint64
	if err := s.ScanPageEvents(ctx, anT0, anT0.Add(time.Minute), func(e *domain.PageEvent) error {
		lines = append(lines, e.Line)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{32, 30, 31}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("page events in order %v, want %v (rank 0, then rank 1 by time)", lines, want)
	}

	batch(t, s, `INSERT INTO probes (ts, ts_ns, probe_id, identity, endpoint, kind, stream, marker, threshold_tokens,
 threshold_node, prompt_tokens, completion_tokens, http_status, response_text, foreign_markers, verdict, ingested_at)`, [][]any{
		{anT0, ns(anT0), "p1", "acme", "http://gw", "leak", uint8(1), "M1", uint64(0), "", uint64(10), uint64(5),
			uint16(200), "…M2…", []string{"M2", "M3"}, "leak", anT0},
		{anT0.Add(-time.Hour), ns(anT0.Add(-time.Hour)), "p2", "initech", "http://gw", "leak", uint8(0), "M2", uint64(0), "",
			uint64(10), uint64(5), uint16(200), "", []string{}, "clean", anT0},
	})
	vs, err := s.ProbeVerdicts(ctx, anT0.Add(-time.Minute), anT0.Add(time.Minute))
	if err != nil || len(vs) != 1 || vs[0].ID != "p1" || !vs[0].Stream || vs[0].HTTPStatus != 200 ||
		!reflect.DeepEqual(vs[0].ForeignMarkers, []string{"M2", "M3"}) {
		t.Fatalf("probe verdicts %+v, %v; want p1's leak (the clean probe is not a verdict)", vs, err)
	}
	ms, err := s.ProbeMarkers(ctx, vs[0].ForeignMarkers)
	if err != nil || len(ms) != 1 || ms["M2"].ProbeID != "p2" || ms["M2"].Identity != "initech" {
		t.Fatalf("probe markers %+v, %v; want M2 sent by p2 (initech), M3 by no probe", ms, err)
	}
}

// TestAnalysisResultsRoundTrip: what a run saves reads back: request
// facts, runs and findings (with the ids known to later runs), the latest
// notification list (the latest save of it, once), and the foreign tenants
// written into stored findings.
func TestAnalysisResultsRoundTrip(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()

	boot := &domain.Boot{MaxReqInputLen: 4090}
	req := &domain.Request{Key: "q1", TS: anT0, Tenant: "acme", Model: "m", Room: 7,
		GW:      &domain.GatewayResponse{RequestID: "q1", Status: 200, Prompt: 5000, Completion: 3, TTFTMs: 9, Line: 1},
		Prefill: &domain.Side{Node: "p0", DPRank: -1, Boot: boot, Rejected: &domain.EngineEvent{Line: 2}},
		Decode: &domain.Side{Node: "d1", DPRank: 1, RID: "r1",
			Fin: &domain.EngineEvent{Line: 3, Prompt: 5000, Completion: 3, FinishType: "stop"}},
		Transfer: []*domain.TransferEvent{{Event: "decode_transfer_failed", Reason: "timeout", Line: 4}}}
	if err := s.SaveRequestFacts(ctx, []*domain.Request{req}, 1); err != nil {
		t.Fatal(err)
	}
	var links, reason string
	var rejected, failed uint8
	var limit uint64
	var ttft float64
	var lineIDs []uint64
	if err := s.QueryRow(ctx, `SELECT links, prefill_rejected, prefill_limit, transfer_failed, transfer_reason, ttft_ms, line_ids
FROM request_facts FINAL WHERE request_key = 'q1'`).Scan(&links, &rejected, &limit, &failed, &reason, &ttft, &lineIDs); err != nil {
		t.Fatal(err)
	}
	if links != "gateway+prefill+transfer+decode" || rejected != 1 || limit != 4090 || failed != 1 || reason != "timeout" ||
		ttft != 9 || !reflect.DeepEqual(lineIDs, []uint64{1, 2, 3, 4}) {
		t.Fatalf("request fact stored as links=%q rejected=%d limit=%d failed=%d reason=%q ttft=%v lines=%v",
			links, rejected, limit, failed, reason, ttft, lineIDs)
	}

	run := domain.Run{ID: "run1", Analyzer: "a", Version: "1", Window: domain.Window{From: anT0, To: anT0.Add(time.Hour)},
		Started: anT0, Finished: anT0, Status: domain.StatusSuccess, Findings: 2, High: 1, Trigger: "test"}
	fs := []domain.Finding{
		{ID: "f1", RunID: "run1", Analyzer: "a", AnalyzerVersion: "1", Severity: domain.High, TS: anT0, FirstTS: anT0,
			LastTS: anT0, RequestKey: "q1", Tenant: "acme", Title: "t1", Details: map[string]string{"b": "2", "a": "1"},
			Evidence: []uint64{1, 2}},
		{ID: "f2", RunID: "run1", Analyzer: "a", AnalyzerVersion: "1", Severity: domain.Low, TS: anT0, FirstTS: anT0,
			LastTS: anT0, Title: "t2"},
	}
	if err := s.SaveFindings(ctx, fs, anT0); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	known, err := s.KnownFindingIDs(ctx, "a", "1")
	if err != nil || !reflect.DeepEqual(known, map[string]bool{"f1": true, "f2": true}) {
		t.Fatalf("known ids %v, %v", known, err)
	}
	if other, _ := s.KnownFindingIDs(ctx, "a", "2"); len(other) != 0 {
		t.Fatalf("another version knows %v", other)
	}
	cur, err := s.LatestFindings(ctx)
	if err != nil || len(cur) != 2 || cur[0].ID != "f1" || cur[0].Details["b"] != "2" ||
		!reflect.DeepEqual(cur[0].Evidence, []uint64{1, 2}) {
		t.Fatalf("current findings %+v, %v", cur, err)
	}

	// The foreign tenants reach the stored row (a background mutation).
	f1 := fs[0]
	f1.ForeignTenants, f1.ForeignRequestKeys = []string{"initech"}, []string{"q9"}
	if err := s.SaveFindingForeign(ctx, []domain.Finding{f1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err = s.LatestFindings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(cur[0].ForeignTenants, []string{"initech"}) && reflect.DeepEqual(cur[0].ForeignRequestKeys, []string{"q9"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("foreign tenants of f1 still %v / %v", cur[0].ForeignTenants, cur[0].ForeignRequestKeys)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(cur[1].ForeignTenants) != 0 {
		t.Fatalf("f2 got foreign tenants %v", cur[1].ForeignTenants)
	}

	if id, _, err := s.LatestReconstruction(ctx); err != nil || id != "" {
		t.Fatalf("no reconstruction yet: got %q, %v", id, err)
	}
	rows := []domain.AffectedRow{
		{Tenant: "acme", Role: domain.Received, Requests: 1, RequestKeys: []string{"q1"}, FindingIDs: []string{"f1"},
			First: anT0, Last: anT0, Confidence: 0.9, Counterparts: []string{"initech"}},
		{Tenant: "initech", Role: domain.Exposed, Tier: domain.Likely, Requests: 1, RequestKeys: []string{"q9"},
			First: anT0, Last: anT0, Confidence: 0.5, PromptTokens: 32, Evidence: []uint64{4}},
	}
	for i, created := range []time.Time{anT0, anT0.Add(time.Minute), anT0.Add(time.Minute)} {
		if err := s.SaveAffected(ctx, "rec1", "case1", created, rows[:1+min(i, 1)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveAffected(ctx, "rec0", "", anT0, rows); err != nil {
		t.Fatal(err)
	}
	id, created, err := s.LatestReconstruction(ctx)
	if err != nil || id != "rec1" || !created.Equal(anT0.Add(time.Minute)) {
		t.Fatalf("latest reconstruction %q at %v, %v; want rec1 at %v", id, created, err, anT0.Add(time.Minute))
	}
	caseID, got, err := s.AffectedRows(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if caseID != "case1" || len(got) != 2 {
		t.Fatalf("rows of rec1: case %q, %d rows; want case1 and its two rows of the latest save, once", caseID, len(got))
	}
	for i := range got {
		if got[i].Evidence == nil {
			got[i].Evidence = []uint64{}
		}
		want := rows[map[domain.Role]int{domain.Exposed: 1, domain.Received: 0}[got[i].Role]]
		if want.Evidence == nil {
			want.Evidence = []uint64{}
		}
		if want.Models == nil {
			want.Models, want.Nodes = []string{}, []string{}
		}
		if want.FindingIDs == nil {
			want.FindingIDs = []string{}
		}
		if want.Counterparts == nil {
			want.Counterparts = []string{}
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("row %d read back as\n%+v\nwant\n%+v", i, got[i], want)
		}
	}
	// The lookup rows of rec1: each request key and finding id with its
	// row's role and tenant.
	var keys []struct {
		Key    string `ch:"key"`
		Role   string `ch:"affected_role"`
		Tenant string `ch:"tenant"`
	}
	if err := s.Select(ctx, &keys, "SELECT DISTINCT key, affected_role, tenant FROM affected_keys WHERE reconstruction_id = 'rec1' ORDER BY key"); err != nil {
		t.Fatal(err)
	}
	wantKeys := fmt.Sprint([]string{"f:f1 received acme", "r:q1 received acme", "r:q9 exposed initech"})
	var gotKeys []string
	for _, k := range keys {
		gotKeys = append(gotKeys, k.Key+" "+k.Role+" "+k.Tenant)
	}
	if fmt.Sprint(gotKeys) != wantKeys {
		t.Fatalf("affected_keys of rec1 = %v, want %v", gotKeys, wantKeys)
	}
}

// Speed points are read in hash parts when there are many (18.16 answers
// a GROUP BY in one block): each request comes once, whatever the parts.
func TestSpeedPointsInParts(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	var facts []*domain.Request
	for i := 0; i < 50; i++ {
		key := fmt.Sprintf("q%02d", i)
		facts = append(facts, &domain.Request{Key: key, TS: anT0.Add(time.Duration(i) * time.Second), Tenant: "acme",
			GW:      &domain.GatewayResponse{RequestID: key, Status: 200, Prompt: 9000, TTFTMs: float64(100 + i), Line: uint64(i + 1)},
			Prefill: &domain.Side{Node: "p0", DPRank: -1}})
	}
	// Two versions of every row, as a re-run leaves them until merged.
	for _, v := range []uint64{1, 2} {
		if err := s.SaveRequestFacts(ctx, facts, v); err != nil {
			t.Fatal(err)
		}
	}
	read := func(per uint64) map[string]int {
		defer chstore.SetSpeedPointsPerQuery(per)()
		got := map[string]int{}
		if err := s.ScanSpeedPoints(ctx, 1, anT0, anT0.Add(time.Hour), func(p domain.SpeedPoint) error {
			got[p.Key]++
			if p.PrefillNode != "p0" || p.TTFTMs < 100 {
				t.Errorf("speed point %+v", p)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	whole, parts := read(1<<40), read(7) // 100 rows: 15 parts
	if len(whole) != 50 || !reflect.DeepEqual(whole, parts) {
		t.Fatalf("in one query %d keys, in parts %d keys (%v)", len(whole), len(parts), parts)
	}
	for k, n := range parts {
		if n != 1 {
			t.Errorf("%s read %d times", k, n)
		}
	}
}

// The server's test of the impossible-speed bounds reads every point the
// Go judge would find under them among all points (the newest row of each
// key), and few others: a key whose older row is under its bound but whose
// newest is not is judged on the newest, and the reverse too.
func TestSpeedSuspectsAreThePointsUnderTheBounds(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	b := domain.SpeedBounds{MinUncached: 8192, Ratio: 0.25, Nodes: []domain.SpeedBound{
		{Node: "p0", Intercept: 100, Slope: 0.1, Margin: 300},
		{Node: "p1", Intercept: 50, Slope: 0.2, Margin: 100},
	}}
	fact := func(i int, node string, prompt, cached uint64, ttft float64, status uint16) *domain.Request {
		key := fmt.Sprintf("q%03d", i)
		return &domain.Request{Key: key, TS: anT0.Add(time.Duration(i) * time.Second), Tenant: "acme",
			GW:      &domain.GatewayResponse{RequestID: key, Status: status, Prompt: prompt, Cached: cached, TTFTMs: ttft, Line: uint64(i + 1)},
			Prefill: &domain.Side{Node: node, DPRank: -1}}
	}
	var v1 []*domain.Request
	for i := range 120 {
		node := []string{"p0", "p1", "p9"}[i%3] // p9 has no bound
		prompt := uint64(4000 + 200*i)
		ttft := []float64{5, 80, 400, 3000}[i%4]
		v1 = append(v1, fact(i, node, prompt, uint64(i%5)*100, ttft, 200))
	}
	// Exactly on p0's bound at u = 10,000 (want 1,100, ratio × want 275):
	// under it for the store's slack, not for the judge.
	v1 = append(v1, fact(200, "p0", 10_000, 0, 275, 200))
	// Under the bound but not judged: an error status, more cached than
	// prompted.
	v1 = append(v1, fact(201, "p0", 20_000, 0, 5, 500), fact(202, "p1", 20_000, 30_000, 5, 200))
	// A newer version of two keys: q025 (under in version 1) is no longer,
	// q007 (not under in version 1) now is.
	v2 := []*domain.Request{fact(25, "p1", 9000, 0, 3000, 200), fact(7, "p1", 20_000, 200, 5, 200)}
	if err := s.SaveRequestFacts(ctx, v1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRequestFacts(ctx, v2, 2); err != nil {
		t.Fatal(err)
	}
	under := func(p domain.SpeedPoint) bool {
		prompt := max(p.Prompt, p.DecodePrompt)
		if p.Status != 200 || p.TTFTMs <= 0 || p.Cached > prompt {
			return false
		}
		for _, nb := range b.Nodes {
			if nb.Node == p.PrefillNode {
				return b.Under(nb, float64(prompt-p.Cached), p.TTFTMs)
			}
		}
		return false
	}
	to := anT0.Add(time.Hour)
	want, all := map[string]bool{}, 0
	if err := s.ScanSpeedPoints(ctx, 1, anT0, to, func(p domain.SpeedPoint) error {
		all++
		if under(p) {
			want[p.Key] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, read := map[string]bool{}, map[string]int{}
	if err := s.ScanSpeedSuspects(ctx, 1, anT0, to, b, func(p domain.SpeedPoint) error {
		read[p.Key]++
		if under(p) {
			got[p.Key] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("under the bounds: store's %v, every point's %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if len(want) < 10 || !want["q007"] || want["q025"] {
		t.Fatalf("the fixture should put q007 and at least 10 points under the bounds, not q025: %v", slices.Sorted(maps.Keys(want)))
	}
	if read["q200"] != 1 || len(read) > len(want)+3 || len(read) >= all/2 {
		t.Fatalf("the store read %d of %d points (%d under, the one on a bound read %d times)", len(read), all, len(want), read["q200"])
	}
	for k, n := range read {
		if n != 1 {
			t.Errorf("%s read %d times", k, n)
		}
	}
	// No bounds, nothing read.
	if err := s.ScanSpeedSuspects(ctx, 1, anT0, to, domain.SpeedBounds{}, func(domain.SpeedPoint) error {
		t.Fatal("a point read with no bounds")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// An INSERT of request_facts is sent in several blocks (factSendRows) and
// still stored as one part: the server gathers an INSERT's blocks, so the
// smaller blocks add no parts for the merges to fold.
func TestRequestFactsInsertIsOnePart(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	const n = 20_000 // three blocks of at most 8,192 rows
	if err := s.SaveRequestFacts(ctx, benchFacts(n), 1); err != nil {
		t.Fatal(err)
	}
	var parts, rows uint64
	if err := s.QueryRow(ctx, `SELECT count(), sum(rows) FROM system.parts
WHERE database = ? AND table = 'request_facts' AND active`, s.Database()).Scan(&parts, &rows); err != nil {
		t.Fatal(err)
	}
	if parts != 1 || rows != n {
		t.Fatalf("one insert of %d rows stored as %d parts of %d rows", n, parts, rows)
	}
}

// Findings are saved in several inserts when there are many: every one is
// stored, once.
func TestSaveManyFindings(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	fs := make([]domain.Finding, 45_000) // three inserts
	for i := range fs {
		fs[i] = domain.Finding{ID: fmt.Sprintf("f%05d", i), RunID: "r1", Analyzer: "abort_reuse", AnalyzerVersion: "2",
			Severity: domain.Low, TS: anT0, FirstTS: anT0, LastTS: anT0, RequestKey: fmt.Sprintf("q%05d", i)}
	}
	if err := s.SaveFindings(ctx, fs, anT0); err != nil {
		t.Fatal(err)
	}
	var n, ids uint64
	if err := s.QueryRow(ctx, "SELECT count(), uniqExact(finding_id) FROM findings").Scan(&n, &ids); err != nil {
		t.Fatal(err)
	}
	if n != 45_000 || ids != 45_000 {
		t.Fatalf("stored %d rows of %d ids, want 45000 of 45000", n, ids)
	}
}

// The reads of saved facts and of their evidence by key, room or line id
// send their lists as tables beside the statement: 30,000 keys with a
// quote and a backslash each (1.3 MB as escaped literals, five times the
// server's default max_query_size) and 30,000 line ids. Every fact and
// line asked for comes back, once, the newest version of each key;
// nothing else does.
func TestReadsByLongLists(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	const n = 30_000
	var facts []*domain.Request
	var keys []string
	var rooms, lines []uint64
	var engine [][]any
	for i := 0; i < n; i++ {
		// A quote and a backslash: the driver escapes both.
		key := fmt.Sprintf(`req-'\%06d`, i)
		ts := anT0.Add(time.Duration(i) * time.Millisecond)
		line := uint64(1_000_000 + i)
		facts = append(facts, &domain.Request{Key: key, TS: ts, Tenant: "acme", Model: "m", Room: uint64(i + 1),
			GW: &domain.GatewayResponse{RequestID: key, Status: 200, Line: line}})
		engine = append(engine, []any{ts, ns(ts), "d1", "decode", int16(0), "received", "r", uint64(i + 1), uint64(1), uint64(0), "", line, anT0})
		if i%2 == 0 {
			keys = append(keys, key) // the even ones by key
		} else if i%3 == 0 {
			rooms = append(rooms, uint64(i+1)) // some odd ones by room
		}
		lines = append(lines, line)
	}
	if err := s.SaveRequestFacts(ctx, facts, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRequestFacts(ctx, facts[:10], 2); err != nil { // newer rows of ten keys
		t.Fatal(err)
	}
	refs, err := s.RunFactRefs(ctx, 1, anT0, anT0.Add(time.Minute), keys, rooms)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(keys) + len(rooms); len(refs) != want {
		t.Fatalf("%d facts read back, want %d", len(refs), want)
	}
	for _, r := range refs {
		var i int
		if _, err := fmt.Sscanf(r.Key[len(`req-'\`):], "%06d", &i); err != nil || r.Room != uint64(i+1) {
			t.Fatalf("ref %+v: key and room disagree", r)
		}
		if !(i%2 == 0 || i%3 == 0) {
			t.Fatalf("ref %s was not asked for", r.Key)
		}
		if want := map[bool]uint64{true: 2, false: 1}[i < 10]; r.Version != want {
			t.Fatalf("ref %s version %d, want %d (the newest)", r.Key, r.Version, want)
		}
	}
	// By room without the lines: the refs above that were asked for by
	// room, the same but for their lines.
	byRoom := map[uint64]domain.FactRef{}
	for _, r := range refs {
		if slices.Contains(rooms, r.Room) {
			r.Lines = nil
			byRoom[r.Room] = r
		}
	}
	owners, err := s.RoomOwnerRefs(ctx, 1, anT0, anT0.Add(time.Minute), rooms)
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != len(rooms) || len(byRoom) != len(rooms) {
		t.Fatalf("%d owner refs of %d rooms (%d by RunFactRefs)", len(owners), len(rooms), len(byRoom))
	}
	for _, o := range owners {
		if want := byRoom[o.Room]; !reflect.DeepEqual(o, want) {
			t.Fatalf("owner ref %+v, want %+v", o, want)
		}
	}

	batch(t, s, `INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, finish_type, line_id, ingested_at)`, engine)
	seen := map[uint64]int{}
	if err := s.EvidenceByLines(ctx, anT0, anT0.Add(time.Minute), lines, domain.EvidenceSink{
		Gateway:  func(*domain.GatewayResponse) error { return nil },
		Engine:   func(e *domain.EngineEvent) error { seen[e.Line]++; return nil },
		Transfer: func(*domain.TransferEvent) error { return nil },
	}); err != nil {
		t.Fatal(err)
	}
	// The block reader sent the lines as its own table: had the server
	// refused its packets, the store would have fallen back to the driver.
	if !chstore.ReadsBlocks(s) {
		t.Fatal("the block reader gave up on the read by lines and the driver read it")
	}
	if len(seen) != n {
		t.Fatalf("%d engine lines read by id, want %d", len(seen), n)
	}
	for l, c := range seen {
		if c != 1 {
			t.Fatalf("line %d read %d times", l, c)
		}
	}
}

// TestFindingsAndListEveryColumn: a finding and a notification-list row
// with every stored field set come back field for field: the two inserts
// name their columns in one list and hand the values in another, so a
// value given to the wrong column shows here.
func TestFindingsAndListEveryColumn(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	f := domain.Finding{ID: "f-all", RunID: "run-all", Analyzer: "abort_reuse", AnalyzerVersion: "7", Severity: domain.High,
		Confidence: 0.75, TS: anT0.Add(3 * time.Second), FirstTS: anT0.Add(time.Second), LastTS: anT0.Add(5 * time.Second),
		RequestKey: "req-k", GatewayRequestID: "gw-1", Tenant: "acme", Room: 1 << 60, PrefillNode: "p0", DecodeNode: "d1",
		DecodeDPRank: -1, RIDs: []string{"rid-a", "rid-b"}, Title: "the title", Explanation: "the <explanation>",
		GroupKey: "group-1", ForeignTenants: []string{"globex", "initech"}, ForeignRequestKeys: []string{"k1", "k2", "k3"},
		Evidence: []uint64{9, 8, 7}, Details: map[string]string{"pages": "12", "abort": "timeout"}}
	other := domain.Finding{ID: "f-min", RunID: "run-all", Analyzer: "abort_reuse", AnalyzerVersion: "7", Severity: domain.Low,
		TS: anT0, FirstTS: anT0, LastTS: anT0, Title: "bare"}
	if err := s.SaveFindings(ctx, []domain.Finding{f, other}, anT0); err != nil {
		t.Fatal(err)
	}
	run := domain.Run{ID: "run-all", Analyzer: "abort_reuse", Version: "7", Window: domain.Window{From: anT0, To: anT0.Add(time.Hour)},
		Started: anT0, Finished: anT0, Status: domain.StatusSuccess, Findings: 2, High: 1, Trigger: "test"}
	if err := s.SaveRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	got, err := s.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]domain.Finding{}
	for _, g := range got {
		byID[g.ID] = g
	}
	if g := byID["f-all"]; !reflect.DeepEqual(g, f) {
		t.Errorf("finding stored as\n%+v\nwant\n%+v", g, f)
	}
	if g := byID["f-min"]; g.Title != "bare" || g.Severity != domain.Low || len(g.ForeignRequestKeys) != 0 || g.Room != 0 {
		t.Errorf("a finding with empty lists stored as %+v", g)
	}

	row := domain.AffectedRow{Tenant: "globex", Role: domain.Exposed, Tier: domain.Likely, Requests: 2,
		First: anT0, Last: anT0.Add(time.Hour), Models: []string{"m1", "m2"}, Nodes: []string{"d1"}, Confidence: 0.5,
		RequestKeys: []string{"k1", "k2"}, FindingIDs: []string{"f-all"}, Counterparts: []string{"acme"},
		PromptTokens: 300, OutputTokens: 40, Evidence: []uint64{7, 9}}
	if err := s.SaveAffected(ctx, "rec-all", "case-all", anT0, []domain.AffectedRow{row}); err != nil {
		t.Fatal(err)
	}
	caseID, rows, err := s.AffectedRows(ctx, "rec-all")
	if err != nil {
		t.Fatal(err)
	}
	if caseID != "case-all" || len(rows) != 1 || !reflect.DeepEqual(rows[0], row) {
		t.Fatalf("list row stored as case %q %+v, want case-all %+v", caseID, rows, row)
	}
}

// A decode node read in time spans of a few lines each (the server's sort
// bounded) comes in the order of one statement over the window: by time,
// line and message; a line stored twice comes twice in a row, even on a
// span's edge; the lines in the window's last second are in.
func TestDecodeNodeLinesInSpans(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	engine := `INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, finish_type, line_id, msg_index, ingested_at)`
	type line struct {
		at  time.Time
		id  uint64
		msg uint8
	}
	var rows [][]any
	var want []line
	row := func(l line, event string) []any {
		return []any{l.at, ns(l.at), "d0", "decode", int16(0), event, fmt.Sprint("r", l.id), l.id, uint64(10), uint64(1), "",
			l.id, l.msg, anT0}
	}
	// Lines in 12 minutes, a few per minute, the last two in the window's
	// last second, two in the first second of a minute.
	end := anT0.Add(12 * time.Minute)
	for i := range 40 {
		at := anT0.Add(time.Duration(i*17+3) * time.Second).Add(time.Duration(i) * time.Millisecond)
		want = append(want, line{at, uint64(1000 - i), 0})
	}
	want = append(want, line{anT0.Add(5 * time.Minute), 7, 0}, line{anT0.Add(5 * time.Minute), 7, 1},
		line{end.Add(100 * time.Millisecond), 3, 0}, line{end.Add(900 * time.Millisecond), 2, 0})
	for _, l := range want {
		rows = append(rows, row(l, "received"))
	}
	slices.Reverse(rows)
	batch(t, s, engine, rows[:20])
	batch(t, s, engine, rows[20:])
	// A line stored twice, in a part of its own, at a minute's start.
	batch(t, s, engine, [][]any{row(line{anT0.Add(5 * time.Minute), 7, 1}, "received")})
	slices.SortFunc(want, func(a, b line) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.id, b.id), cmp.Compare(a.msg, b.msg))
	})
	i := slices.IndexFunc(want, func(l line) bool { return l.id == 7 && l.msg == 1 })
	want = slices.Insert(want, i, want[i])

	for _, perQuery := range []int{1 << 30, 5, 1} {
		t.Run(fmt.Sprint(perQuery, " lines a statement"), func(t *testing.T) {
			defer chstore.SetLinesPerQuery("decode", perQuery)()
			var got []line
			if err := s.ScanDecodeNodeLines(ctx, anT0, end, "d0", func(e *domain.EngineEvent) error {
				got = append(got, line{e.TS, e.Line, e.Msg})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, func(a, b line) bool { return a.at.Equal(b.at) && a.id == b.id && a.msg == b.msg }) {
				t.Errorf("got %d lines %v\nwant %d %v", len(got), got, len(want), want)
			}
		})
	}
}

// The prefill host votes counted in time spans of a few lines each add up
// to one statement's: each node's distinct Receive lines naming the host,
// a line stored twice counted once, the window's last second in.
func TestPrefillHostVotesInSpans(t *testing.T) {
	s := testdb.New(t)
	ctx := context.Background()
	engine := `INSERT INTO engine_events (ts, ts_ns, node, role, event, rid, bootstrap_room, bootstrap_host, line_id, ingested_at)`
	end := anT0.Add(10 * time.Minute)
	want := map[string]map[string]int{"10.0.0.1": {"p0": 0, "p1": 0}, "10.0.0.2": {"p1": 0}}
	var rows [][]any
	vote := func(at time.Time, node, host string, line uint64) {
		rows = append(rows, []any{at, ns(at), node, "prefill", "received", "r", line, host, line, anT0})
		want[host][node]++
	}
	for i := range 30 {
		at := anT0.Add(time.Duration(i*20) * time.Second)
		vote(at, "p0", "10.0.0.1", uint64(100+i))
		if i%3 == 0 {
			vote(at, "p1", "10.0.0.1", uint64(200+i))
		}
		vote(at.Add(time.Second), "p1", "10.0.0.2", uint64(300+i))
	}
	vote(end.Add(500*time.Millisecond), "p1", "10.0.0.2", 400)
	batch(t, s, engine, rows)
	// Line 100 again, in a part of its own; a decode line and a line with
	// no host, which do not vote.
	batch(t, s, engine, [][]any{rows[0],
		{anT0, ns(anT0), "d0", "decode", "received", "r", uint64(1), "10.0.0.1", uint64(500), anT0},
		{anT0, ns(anT0), "p0", "prefill", "received", "r", uint64(1), "", uint64(501), anT0}})
	for _, perQuery := range []int{1 << 30, 7, 1} {
		t.Run(fmt.Sprint(perQuery, " lines a statement"), func(t *testing.T) {
			defer chstore.SetLinesPerQuery("votes", perQuery)()
			got, err := s.PrefillHostVotes(ctx, anT0, end)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("votes %v, want %v", got, want)
			}
		})
	}
}
