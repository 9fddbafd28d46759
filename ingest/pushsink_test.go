package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/grafana/loki-client-go/loki"
	"github.com/grafana/loki-client-go/pkg/backoff"
	"github.com/grafana/loki-client-go/pkg/urlutil"
	logproto "github.com/grafana/loki/pkg/push"
	"github.com/prometheus/common/model"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/internal/chlocal"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

func lokiClient(t *testing.T, base string) *loki.Client {
	t.Helper()
	u, err := url.Parse(base + "/loki/api/v1/push")
	if err != nil {
		t.Fatal(err)
	}
	c, err := loki.New(loki.Config{
		URL:           urlutil.URLValue{URL: u},
		BatchWait:     20 * time.Millisecond,
		BatchSize:     4096,
		Timeout:       10 * time.Second,
		BackoffConfig: backoff.BackoffConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxRetries: 3},
		TenantID:      "ops",
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sglangLine returns a real-format line: every 10th a #30233 rejection.
func sglangLine(i int, ts time.Time) string {
	stamp := ts.UTC().Format("2006-01-02 15:04:05")
	if i%10 == 0 {
		return fmt.Sprintf("[%s DP0 TP0] Input length (%d tokens) exceeds the maximum allowed length (681274 tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='rid-%d'", stamp, 700000+i, i)
	}
	return fmt.Sprintf("[%s DP0 TP0] Prefill batch, #new-seq: 1, #new-token: %d, #cached-token: 0, token usage: 0.41, #running-req: 1, #queue-req: 0, input throughput (token/s): 15734.14", stamp, 1000+i)
}

// The real Loki client (what promtail is built from) pushes into kvtrail
// and the lines land in ClickHouse, typed, with labels and metadata kept;
// pushing the same entries again adds nothing.
func TestLokiPushIntoClickHouse(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	sink := ingest.NewPushSink(s, nil, nil)
	srv := httptest.NewServer(push.Handler(push.KindLoki, push.Limits{}, sink, nil))
	defer srv.Close()

	base := time.Date(2026, 7, 2, 8, 0, 0, 0, time.UTC)
	send := func() {
		c := lokiClient(t, srv.URL)
		for i := 0; i < 200; i++ {
			ts := base.Add(time.Duration(i) * time.Second)
			ls := model.LabelSet{"job": "sglang", "node": "prefill-0", "role": "prefill", "format": "sglang"}
			if err := c.HandleWithMetadata(ls, ts, sglangLine(i, ts), logproto.LabelsAdapter{{Name: "pod", Value: "p-" + strconv.Itoa(i%2)}}); err != nil {
				t.Fatal(err)
			}
		}
		c.Stop()
	}
	send()
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE node = 'prefill-0'"); got != 200 {
		t.Fatalf("raw_lines = %d, want 200", got)
	}
	if got := count(t, s, "SELECT count() FROM engine_events FINAL WHERE event = 'rejected' AND limit_tokens = 681274"); got != 20 {
		t.Errorf("rejections = %d, want 20", got)
	}
	if got := count(t, s, "SELECT count() FROM batch_stats FINAL WHERE kind = 'prefill'"); got != 180 {
		t.Errorf("batch lines = %d, want 180", got)
	}
	q := "SELECT count() FROM raw_lines WHERE has(attr_keys, 'meta.pod') AND has(attr_keys, 'label.job') AND has(attr_values, 'ops')"
	if got := count(t, s, q); got != 200 {
		t.Errorf("lines with labels, metadata and tenant kept = %d, want 200", got)
	}
	send() // an overlapping shipper, or a client retry
	for _, tb := range []string{"raw_lines", "engine_events", "batch_stats"} {
		want := map[string]uint64{"raw_lines": 200, "engine_events": 20, "batch_stats": 180}[tb]
		if got := count(t, s, "SELECT count() FROM "+tb+" FINAL"); got != want {
			t.Errorf("%s after a repeated push: %d rows, want %d", tb, got, want)
		}
	}
	// The stream is one line_sources row (migration 0013), written with
	// the first push and named by every line.
	if got := count(t, s, "SELECT count() FROM line_sources FINAL WHERE node = 'prefill-0' AND file_digest LIKE 'push:%' AND source LIKE '%job%'"); got != 1 {
		t.Errorf("line_sources after two pushes of one stream: %d rows, want 1", got)
	}
	q = "SELECT count() FROM raw_lines FINAL WHERE source = '' AND source_ref IN (SELECT source_ref FROM line_sources)"
	if got := count(t, s, q); got != 200 {
		t.Errorf("pushed lines naming their stream by a stored source_ref: %d, want 200", got)
	}
	var records, bytes uint64
	if err := s.QueryRow(ctx, "SELECT argMax(lines, version), argMax(bytes, version) FROM ingest_sources WHERE node = 'prefill-0'").Scan(&records, &bytes); err != nil {
		t.Fatal(err)
	}
	// Completeness counts distinct stored lines: the repeated push stored
	// nothing new, so it counts nothing.
	if records != 200 {
		t.Errorf("completeness accounting counted %d pushed lines, want 200 (two pushes of the same 200)", records)
	}
	var want uint64
	for i := 0; i < 200; i++ {
		want += uint64(len(sglangLine(i, base.Add(time.Duration(i)*time.Second))))
	}
	if bytes != want {
		t.Errorf("completeness accounting counted %d pushed bytes, want %d", bytes, want)
	}
}

func ndjsonPush(t *testing.T, url string, from, n int) int {
	t.Helper()
	var body bytes.Buffer
	base := time.Date(2026, 7, 2, 9, 0, 0, 0, time.UTC)
	for i := from; i < from+n; i++ {
		ts := base.Add(time.Duration(i) * time.Second)
		b, _ := json.Marshal(map[string]any{"ts": ts.Format(time.RFC3339Nano), "line": sglangLine(i, ts), "node": "decode-1", "role": "decode", "format": "sglang"})
		body.Write(b)
		body.WriteByte('\n')
	}
	resp, err := http.Post(url+"/ingest/v1/lines", "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// ClickHouse goes down mid-stream: pushes are still acknowledged (spooled,
// fsync'd) and, once the real server is back, drained without loss.
func TestPushSpoolsWhileClickHouseIsDown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	port := freeTCPPort(t)
	start := func() *chlocal.Server {
		srv, err := chlocal.Start(ctx, chlocal.Options{Binary: "clickhouse-server", Dir: filepath.Join(dir, "ch"), TCPPort: port, StartTimeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("start ClickHouse: %v", err)
		}
		return srv
	}
	testdb.Addr(t) // fails (CI) or skips when ClickHouse is unavailable
	ch := start()
	defer func() { ch.Stop() }()
	s, err := chstore.Open(ctx, chstore.Options{Addrs: []string{ch.Addr}, Database: "kvtrail", Username: "default",
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(filepath.Join(dir, "spool"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sink := ingest.NewPushSink(s, sp, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /ingest/v1/lines", push.Handler(push.KindNDJSON, push.Limits{}, sink, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	sent := 0
	for i := 0; i < 5; i++ {
		if code := ndjsonPush(t, srv.URL, sent, 100); code != http.StatusNoContent {
			t.Fatalf("push %d before the outage: %d", i, code)
		}
		sent += 100
	}
	ch.Stop() // the real server goes away mid-stream
	for i := 0; i < 5; i++ {
		if code := ndjsonPush(t, srv.URL, sent, 100); code != http.StatusNoContent {
			t.Fatalf("push %d during the outage: %d, want 204 (spooled)", i, code)
		}
		sent += 100
	}
	if sp.Len() == 0 {
		t.Fatal("nothing was spooled while ClickHouse was down")
	}
	ch = start()
	deadline := time.Now().Add(30 * time.Second)
	for sp.Len() > 0 {
		if _, err := sink.Drain(ctx); err != nil && time.Now().After(deadline) {
			t.Fatalf("drain after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// New pushes are stored again once drained (the spool is the
	// write-ahead log of every push).
	if code := ndjsonPush(t, srv.URL, sent, 100); code != http.StatusNoContent {
		t.Fatalf("push after recovery: %d", code)
	}
	sent += 100
	if _, err := sink.Drain(ctx); err != nil {
		t.Fatalf("drain after recovery: %v", err)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE node = 'decode-1'"); got != uint64(sent) {
		t.Fatalf("raw_lines = %d after the outage, want every one of the %d acknowledged lines", got, sent)
	}
	// Completeness counts each stored line once, however often the drain
	// tried to write it during the outage.
	if got := count(t, s, "SELECT argMax(lines, version) FROM ingest_sources WHERE node = 'decode-1'"); got != uint64(sent) {
		t.Errorf("ingest_sources lines = %d, want %d (distinct stored lines)", got, sent)
	}
}

// A full spool is a clear 503, never a silent drop.
func TestPushFullSpoolIs503(t *testing.T) {
	dir := t.TempDir()
	sp, err := spool.Open(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	down := &downStore{}
	sink := ingest.NewPushSink(down, sp, nil)
	srv := httptest.NewServer(push.Handler(push.KindNDJSON, push.Limits{}, sink, nil))
	defer srv.Close()
	var codes []int
	for i := 0; i < 40; i++ {
		codes = append(codes, ndjsonPushTo(t, srv.URL, i*100, 100))
	}
	if codes[0] != http.StatusNoContent {
		t.Fatalf("first push: %d, want 204 (spooled)", codes[0])
	}
	if codes[len(codes)-1] != http.StatusServiceUnavailable {
		t.Fatalf("pushes past the spool bound: %v, want 503 at the end", codes)
	}
}

func ndjsonPushTo(t *testing.T, base string, from, n int) int {
	t.Helper()
	var body bytes.Buffer
	for i := from; i < from+n; i++ {
		b, _ := json.Marshal(map[string]any{"line": fmt.Sprintf("%d %s", i, bytes.Repeat([]byte("x"), 1000)), "node": "n"})
		body.Write(b)
		body.WriteByte('\n')
	}
	resp, err := http.Post(base, "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
