package push_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grafana/loki-client-go/loki"
	"github.com/grafana/loki-client-go/pkg/backoff"
	"github.com/grafana/loki-client-go/pkg/urlutil"
	logproto "github.com/grafana/loki/pkg/push"
	"github.com/prometheus/common/model"

	"github.com/kvtrail/kvtrail/ingest/push"
)

// TestLokiClient pushes through the real loki-client-go (the code promtail
// is built from) over real HTTP and checks the sink saw exactly what was
// sent, in both of the client's encodings.
func TestLokiClient(t *testing.T) {
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonMode), func(t *testing.T) {
			sink := &recordingSink{}
			var pushes atomic.Int32
			h := push.Handler(push.KindLoki, push.Limits{}, sink, nil)
			mux := http.NewServeMux()
			mux.HandleFunc("POST /loki/api/v1/push", func(w http.ResponseWriter, r *http.Request) {
				pushes.Add(1)
				h.ServeHTTP(w, r)
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()

			c := mustLokiClient(t, srv.URL, jsonMode)
			base := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
			var want []push.Entry
			for i := range 50 {
				node := fmt.Sprintf("n%d", i%3)
				ls := model.LabelSet{"job": "sglang", "node": model.LabelValue(node), "quote": `a"b\c`}
				ts := base.Add(time.Duration(i) * time.Millisecond)
				line := fmt.Sprintf("req %d prefill done, bytes=%d", i, i*100)
				var meta map[string]string
				var err error
				if i%5 == 0 && !jsonMode { // the client's JSON mode drops metadata
					meta = map[string]string{"rid": fmt.Sprintf("r-%d", i)}
					err = c.HandleWithMetadata(ls, ts, line, logproto.LabelsAdapter{{Name: "rid", Value: meta["rid"]}})
				} else {
					err = c.Handle(ls, ts, line)
				}
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, push.Entry{
					Stream: map[string]string{"job": "sglang", "node": node, "quote": `a"b\c`},
					Ts:     ts, Line: line, Metadata: meta, Tenant: "tenant-a",
				})
			}
			c.Stop() // flushes pending batches synchronously
			sameEntries(t, sink.got(), want)
			if pushes.Load() < 2 {
				t.Errorf("client sent %d pushes, want several batches", pushes.Load())
			}
		})
	}
}

// mustLokiClient configures the client for a fast test: the client sends a
// batch after BatchWait, retries 5xx with backoff and then drops the batch,
// so retries are few and short (a failure shows up as missing entries, not
// as a hang).
func mustLokiClient(t *testing.T, base string, jsonMode bool) *loki.Client {
	t.Helper()
	u, err := url.Parse(base + "/loki/api/v1/push")
	if err != nil {
		t.Fatal(err)
	}
	c, err := loki.New(loki.Config{
		URL:           urlutil.URLValue{URL: u},
		BatchWait:     20 * time.Millisecond,
		BatchSize:     512, // small, so the 50 entries span several batches
		Timeout:       5 * time.Second,
		BackoffConfig: backoff.BackoffConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, MaxRetries: 2},
		TenantID:      "tenant-a",
		EncodeJson:    jsonMode,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}
