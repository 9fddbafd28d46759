package promimport

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

// sglangPage is a /metrics page as SGLang serves it, plus one broken line.
const sglangPage = `# HELP sglang:max_total_num_tokens Maximum total number of tokens.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{engine_type="prefill",model_name="qwen",tp_rank="0"} 500000.0
# TYPE sglang:context_len gauge
sglang:context_len{engine_type="prefill",model_name="qwen",tp_rank="0"} 40960.0
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="prefill",model_name="qwen",tp_rank="0"} NaN
# TYPE sglang:num_transfer_failed_reqs_total counter
sglang:num_transfer_failed_reqs_total{engine_type="prefill",model_name="qwen",tp_rank="0"} 3.0 1795824000123
sglang:broken{engine_type="prefill" 1
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="qwen"} 2.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="qwen"} 5.0
sglang:time_to_first_token_seconds_sum{model_name="qwen"} 1.25
sglang:time_to_first_token_seconds_count{model_name="qwen"} 5.0
`

const pageSamples = 8 // sample lines in sglangPage that parse

// secret appears in every failing page; it must never reach the log.
const secret = "SECRET-BODY-TEXT"

// metricsServers starts the endpoints of TestScrapeOnce by behaviour.
func metricsServers(t *testing.T) map[string]string {
	t.Helper()
	release := make(chan struct{})
	handlers := map[string]http.HandlerFunc{
		"good": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(sglangPage)) },
		"error500": func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Traceback ... "+secret, http.StatusInternalServerError)
		},
		"hang": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		},
		"garbage": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("<html><body>\n" + secret + " not metrics\n</body></html>\n"))
		},
		"huge": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(strings.Repeat("sglang:num_running_reqs 1\n", 10000)))
		},
	}
	urls := map[string]string{}
	for name, h := range handlers {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		urls[name] = srv.URL + "/metrics"
	}
	t.Cleanup(func() { close(release) }) // runs before the Close calls above
	return urls
}

// syncBuffer is a log sink safe to read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestScrapeOnce(t *testing.T) {
	store := testdb.New(t)
	urls := metricsServers(t)
	var logs syncBuffer
	hooks := &Counters{}
	nodes := []string{"good", "error500", "hang", "garbage", "huge"}
	var targets []Target
	for _, n := range nodes {
		targets = append(targets, Target{Node: n, URL: urls[n]})
	}
	s := &Scraper{Store: store, Targets: targets, Interval: time.Minute, Timeout: 500 * time.Millisecond,
		MaxBodyBytes: 64 << 10, Hooks: hooks,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}

	start := time.Now()
	res, err := s.ScrapeOnce(context.Background())
	if err != nil {
		t.Fatalf("ScrapeOnce: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("round took %s: the hanging endpoint held it up", took)
	}

	tests := []struct {
		node      string
		samples   int
		malformed int
		errHas    string
	}{
		{"good", pageSamples, 1, ""},
		{"error500", 0, 0, "HTTP 500 Internal Server Error"},
		{"hang", 0, 0, "deadline exceeded"},
		{"garbage", 0, 3, "not a Prometheus text page"},
		{"huge", 0, 0, "body exceeds 65536 bytes"},
	}
	for i, tt := range tests {
		r := res[i]
		if r.Target.Node != tt.node || r.Samples != tt.samples || r.Malformed != tt.malformed {
			t.Errorf("%s: result %+v, want %d samples, %d malformed", tt.node, r, tt.samples, tt.malformed)
		}
		switch {
		case tt.errHas == "" && r.Err != nil:
			t.Errorf("%s: unexpected error %v", tt.node, r.Err)
		case tt.errHas != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tt.errHas)):
			t.Errorf("%s: error %v, want it to mention %q", tt.node, r.Err, tt.errHas)
		}
		c := hooks.Node(tt.node)
		if c.Scrapes != 1 || (c.Failures == 1) != (tt.errHas != "") || c.Samples != tt.samples {
			t.Errorf("%s: counters %+v", tt.node, c)
		}
	}
	if !errors.Is(res[2].Err, context.DeadlineExceeded) {
		t.Errorf("hang: %v is not a deadline", res[2].Err)
	}
	if rows, fails := hooks.Written(); rows != pageSamples || fails != 0 {
		t.Errorf("written rows %d, failed writes %d", rows, fails)
	}
	t.Logf("scraper log:\n%s", logs.String())
	if strings.Contains(logs.String(), secret) {
		t.Errorf("a response body reached the log:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "scrape failed"); n != 4 {
		t.Errorf("%d failures logged, want 4:\n%s", n, logs.String())
	}

	// In ClickHouse: only the good node's samples, untimestamped ones at
	// the scrape's start, the explicit millisecond timestamp kept.
	got := readSamples(t, store)
	if len(got) != pageSamples {
		t.Fatalf("%d samples stored, want %d: %v", len(got), pageSamples, got)
	}
	scrapeMs := uint64(res[0].Start.UnixMilli())
	want := []struct {
		name, labels string
		ms           uint64
		value        float64
	}{
		{"sglang:max_total_num_tokens", "engine_type=prefill,model_name=qwen,tp_rank=0", scrapeMs, 500000},
		{"sglang:context_len", "engine_type=prefill,model_name=qwen,tp_rank=0", scrapeMs, 40960},
		{"sglang:token_usage", "engine_type=prefill,model_name=qwen,tp_rank=0", scrapeMs, math.NaN()},
		{"sglang:num_transfer_failed_reqs_total", "engine_type=prefill,model_name=qwen,tp_rank=0", 1795824000123, 3},
		{"sglang:time_to_first_token_seconds_bucket", "le=+Inf,model_name=qwen", scrapeMs, 5},
		{"sglang:time_to_first_token_seconds_bucket", "le=0.1,model_name=qwen", scrapeMs, 2},
		{"sglang:time_to_first_token_seconds_sum", "model_name=qwen", scrapeMs, 1.25},
		{"sglang:time_to_first_token_seconds_count", "model_name=qwen", scrapeMs, 5},
	}
	for _, w := range want {
		g, ok := got[sampleKey{"good", w.name, w.labels, w.ms}]
		if !ok || math.IsNaN(g) != math.IsNaN(w.value) || (!math.IsNaN(g) && g != w.value) {
			t.Errorf("%s{%s}@%d = %v (found %v), want %v", w.name, w.labels, w.ms, g, ok, w.value)
		}
	}
}

func TestScraperRunStopsOnCancel(t *testing.T) {
	store := testdb.New(t)
	urls := metricsServers(t)
	hooks := &Counters{}
	s := &Scraper{Store: store, Hooks: hooks, Interval: 200 * time.Millisecond,
		Targets: []Target{{"good", urls["good"]}, {"hang", urls["hang"]}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// Rounds tick every 200 ms, and the hanging target's timeout is capped
	// at the interval, so it cannot hold the good target's rounds back:
	// wait for three of them (not a fixed time, which a loaded machine's
	// slow rounds outlast), then cancel.
	deadline := time.Now().Add(20 * time.Second)
	for hooks.Node("good").Scrapes < 3 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the good target was scraped %d times in 20 s beside a hanging one", hooks.Node("good").Scrapes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
	good, hang := hooks.Node("good"), hooks.Node("hang")
	if good.Scrapes < 3 || good.Failures != 0 || hang.Failures != hang.Scrapes {
		t.Errorf("good %+v, hang %+v", good, hang)
	}
	var stamps uint64
	if err := store.QueryRow(context.Background(),
		"SELECT uniqExact(ts_ms) FROM metric_samples WHERE name = ? AND node = ?",
		"sglang:context_len", "good").Scan(&stamps); err != nil {
		t.Fatal(err)
	}
	if int(stamps) < 2 || int(stamps) > good.Scrapes {
		t.Errorf("%d distinct scrape times stored for %d scrapes", stamps, good.Scrapes)
	}
}
