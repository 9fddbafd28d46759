package chstore_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

func openStore(t testing.TB, o chstore.Options) *chstore.Store {
	t.Helper()
	s, err := chstore.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type scanned struct {
	engine, decode []domain.EngineEvent
	gateway        []domain.GatewayResponse
	speed          []domain.SpeedPoint
	pages          []domain.PageEvent
}

func scanAll(t *testing.T, s *chstore.Store, to time.Time) scanned {
	t.Helper()
	ctx := context.Background()
	var out scanned
	if err := s.ScanEngineEvents(ctx, anT0, to, func(e *domain.EngineEvent) error {
		out.engine = append(out.engine, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"d0", "d1", "d2"} {
		if err := s.ScanDecodeNodeLines(ctx, anT0, to, node, func(e *domain.EngineEvent) error {
			out.decode = append(out.decode, *e)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ScanGatewayResponses(ctx, domain.Window{From: anT0, To: to}, func(g *domain.GatewayResponse) error {
		out.gateway = append(out.gateway, *g)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.ScanSpeedPoints(ctx, 1, anT0, to, func(p domain.SpeedPoint) error {
		out.speed = append(out.speed, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.ScanPageEvents(ctx, anT0, to, func(e *domain.PageEvent) error {
		c := *e
		c.Pages = slices.Clone(e.Pages) // valid only during the call
		out.pages = append(out.pages, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The analysis's scans read the same events a block at a time
// (internal/chblock), row by row through the driver (RowReads), and
// through the driver after the block reader failed to speak to the server
// (the fallback). The rows span several blocks of both paths, repeat
// lines as an unmerged re-ingest leaves them, and carry empty, quoted and
// multi-byte text.
func TestScanPathsAgree(t *testing.T) {
	o := testdb.Options(t)
	s := openStore(t, o)
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(context.Background()); err != nil {
		t.Fatal(err)
	}

	const n = 30_000
	at := func(i int) time.Time { return anT0.Add(time.Duration(i) * 10 * time.Millisecond) }
	var eng, gw, pg [][]any
	var pagesOf [][]uint32 // by i
	events := []string{"received", "finished", "prefill_done", "http_access"}
	for i := range n {
		rid, msg, fin := fmt.Sprintf("rid-%d", i/3), "", ""
		if i%7 == 0 {
			rid = ""
		}
		if i%3 == 1 {
			fin, msg = "abort", fmt.Sprintf(`it's "aborted" <b>%d</b> — ü`, i)
		}
		row := []any{at(i), ns(at(i)), fmt.Sprintf("d%d", i%3), []string{"decode", "prefill"}[i%5/4], int16(i%4 - 1),
			events[i%4], rid, uint64(i / 3), uint64(i * 7), uint64(i % 50), uint64(i % 9), fin, msg, uint16(200 + i%2), uint64(1000 + i), anT0}
		eng = append(eng, row)
		if i%97 == 0 {
			eng = append(eng, row) // stored twice, not merged yet
		}
		// Page events: empty, single and long page lists, a rank and a
		// node of their own per lane, a duplicate as an unmerged re-ingest
		// leaves it.
		pages := make([]uint32, i%70)
		for j := range pages {
			pages[j] = uint32(i*31 + j)
		}
		p := []any{at(i), ns(at(i)), fmt.Sprintf("d%d", i%2), int16(i % 3), []string{"alloc", "write", "read", "free"}[i%4],
			rid, uint64(i / 2), pages, uint64(2_000_000 + i), anT0}
		pg, pagesOf = append(pg, p), append(pagesOf, pages)
		if i%89 == 0 {
			pg = append(pg, p)
		}
		if i%3 == 0 {
			g := []any{at(i), ns(at(i)), fmt.Sprintf("req-%d", i), fmt.Sprintf("tenant-%d", i%4), "m", uint16(200),
				uint64(i), uint64(i % 11), uint64(i % 5), float64(i) / 3, float64(i) / 2, "http://10.0.0.1:30000",
				fmt.Sprintf("http://10.0.0.%d:30000", 2+i%3), uint64(i / 3), "p-" + rid, rid, uint64(500_000 + i), anT0}
			gw = append(gw, g)
			if i%91 == 0 {
				gw = append(gw, g)
			}
		}
	}
	batch(t, s, `INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, cached_tokens, finish_type, finish_message, status_code, line_id, ingested_at)`, eng)
	batch(t, s, `INSERT INTO page_events (ts, ts_ns, node, dp_rank, event, rid, bootstrap_room, pages, line_id, ingested_at)`, pg)
	batch(t, s, `INSERT INTO gateway_responses (ts, ts_ns, request_id, tenant, model, status, prompt_tokens,
 completion_tokens, cached_tokens, ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room,
 prefill_rid, decode_rid, line_id, ingested_at)`, gw)

	// The speed fit's points come back from request_facts, two versions
	// of each as a re-run leaves them before the merge.
	var facts []*domain.Request
	for i := range n / 3 {
		key := fmt.Sprintf("k-%05d", i)
		r := &domain.Request{Key: key, TS: at(3 * i), Tenant: fmt.Sprintf("tenant-%d", i%4),
			GW: &domain.GatewayResponse{RequestID: key, Status: uint16(200 + 300*(i%5/4)), Prompt: uint64(i * 13),
				Cached: uint64(i % 17), TTFTMs: float64(i) / 7, Line: uint64(i + 1)}}
		if i%6 != 0 {
			r.Prefill = &domain.Side{Node: fmt.Sprintf("p%d", i%3), DPRank: -1}
		}
		if i%2 == 0 {
			r.Decode = &domain.Side{Node: "d0", DPRank: -1, Fin: &domain.EngineEvent{Prompt: uint64(i*13 + i%3)}}
		}
		facts = append(facts, r)
	}
	for _, v := range []uint64{1, 2} {
		if err := s.SaveRequestFacts(context.Background(), facts, v); err != nil {
			t.Fatal(err)
		}
	}

	to := at(n)
	if !chstore.ReadsBlocks(s) {
		t.Fatal("a store on a single server must read blocks")
	}
	blocks := scanAll(t, s, to)
	// Every line once (http_access is not a request line); decode lines
	// as stored, duplicates included, for the replay to skip.
	if want := n - n/4; len(blocks.engine) != want {
		t.Fatalf("%d engine lines, want %d", len(blocks.engine), want)
	}
	if want := n / 3; len(blocks.gateway) != want {
		t.Fatalf("%d gateway responses, want %d", len(blocks.gateway), want)
	}
	if len(blocks.decode) == 0 {
		t.Fatal("no decode lines")
	}
	if len(blocks.pages) != len(pg) {
		t.Fatalf("%d page events, want %d (duplicates included)", len(blocks.pages), len(pg))
	}
	for i := 1; i < len(blocks.pages); i++ {
		a, b := blocks.pages[i-1], blocks.pages[i]
		if a.Node > b.Node || a.Node == b.Node && (a.DPRank > b.DPRank || a.DPRank == b.DPRank && a.TS.After(b.TS)) {
			t.Fatalf("page events %d and %d out of (node, rank, time) order: %+v, %+v", i-1, i, a, b)
		}
	}
	for _, e := range blocks.pages {
		i := int(e.Line - 2_000_000)
		if want := pagesOf[i]; !slices.Equal(e.Pages, want) || e.Room != uint64(i/2) || e.TS != at(i) {
			t.Fatalf("page event of line %d: %+v, want pages %v, room %d", e.Line, e, want, i/2)
		}
	}
	if len(blocks.speed) != n/3 {
		t.Fatalf("%d speed points, want %d", len(blocks.speed), n/3)
	}
	for i, p := range blocks.speed { // in request_key order, as facts
		f := facts[i]
		want := domain.SpeedPoint{Key: f.Key, TS: f.TS, Prompt: f.GW.Prompt, DecodePrompt: f.Decode.Prompt(),
			Cached: f.GW.Cached, TTFTMs: f.GW.TTFTMs, Status: f.GW.Status}
		if f.Prefill != nil {
			want.PrefillNode = f.Prefill.Node
		}
		if p != want {
			t.Fatalf("speed point %d: %+v, want %+v", i, p, want)
		}
	}

	ro := o
	ro.RowReads = true
	rows := openStore(t, ro)
	if chstore.ReadsBlocks(rows) {
		t.Fatal("RowReads: the store reads blocks")
	}
	fb := openStore(t, o)
	chstore.PointBlocksAt(fb, testdb.NotClickHouse(t, "SSH-2.0-OpenSSH_9.6\r\n"))
	for name, st := range map[string]*chstore.Store{"rows": rows, "fallback": fb} {
		got := scanAll(t, st, to)
		for what, pair := range map[string][2]any{
			"engine": {got.engine, blocks.engine}, "decode": {got.decode, blocks.decode}, "gateway": {got.gateway, blocks.gateway},
			"speed": {got.speed, blocks.speed}, "page": {got.pages, blocks.pages},
		} {
			if !reflect.DeepEqual(pair[0], pair[1]) {
				t.Errorf("%s: %s events differ from the block path's", name, what)
			}
		}
	}
	if chstore.ReadsBlocks(fb) {
		t.Error("after a failed block read the store still reads blocks")
	}

	// The page events' sort spilled to the server's disk gives the same
	// events on both paths, and each read carries the setting: the block
	// path sends what the caller's context holds, as the driver does, so
	// the reads are logged (log_queries from the context; a server's
	// default is not to log) with the spill setting.
	// About 1 MiB, a value of this run's own for the query log.
	spill := 1<<20 + int(time.Now().UnixNano()%1_000_000)
	chstore.SpillPageSorts(t, spill)
	logged := chstore.WithSettings(context.Background(), clickhouse.Settings{"log_queries": 1})
	for name, st := range map[string]*chstore.Store{"blocks": s, "rows": rows} {
		var got []domain.PageEvent
		if err := st.ScanPageEvents(logged, anT0, to, func(e *domain.PageEvent) error {
			c := *e
			c.Pages = slices.Clone(e.Pages)
			got = append(got, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, blocks.pages) {
			t.Errorf("%s: page events sorted with a spill differ from the block path's", name)
		}
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: o.Addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if err := conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		t.Fatal(err)
	}
	var spilled uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.query_log WHERE type = 2 AND query LIKE '%FROM page_events%'
 AND Settings.Values[indexOf(Settings.Names, 'max_bytes_before_external_sort')] = ?`, strconv.Itoa(spill)).Scan(&spilled); err != nil {
		t.Fatal(err)
	}
	if spilled < 2 {
		t.Errorf("%d page-event reads ran with the spill at %d bytes, want both paths'", spilled, spill)
	}
}
