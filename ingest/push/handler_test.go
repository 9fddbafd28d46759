package push_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	logproto "github.com/grafana/loki/pkg/push"

	"github.com/kvtrail/kvtrail/ingest/push"
)

type sinkFunc func(context.Context, []push.Entry) error

func (f sinkFunc) Accept(ctx context.Context, e []push.Entry) error { return f(ctx, e) }

type statsRecorder struct {
	mu  sync.Mutex
	all []push.RequestStats
}

func (s *statsRecorder) ObserveRequest(st push.RequestStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, st)
}

func TestHandler(t *testing.T) {
	body := MustProtoBody(t, logproto.Stream{Labels: `{job="j"}`, Entries: []logproto.Entry{{Timestamp: t0, Line: "hello " + secret}}})
	ok := func(context.Context, []push.Entry) error { return nil }
	for _, tc := range []struct {
		name        string
		kind        string
		method      string
		body        []byte
		headers     []string
		sink        func(context.Context, []push.Entry) error
		wantStatus  int
		wantReason  string
		wantEntries int
	}{
		{name: "loki ok", kind: push.KindLoki, body: body, sink: ok, wantStatus: 204, wantEntries: 1},
		{name: "ndjson ok", kind: push.KindNDJSON, body: []byte(`{"line":"a"}` + "\n" + `{"line":"b"}`), sink: ok, wantStatus: 204, wantEntries: 2},
		{name: "empty push skips sink", kind: push.KindNDJSON, body: nil, sink: func(context.Context, []push.Entry) error { panic("sink called") }, wantStatus: 204},
		{name: "wrong method", kind: push.KindLoki, method: http.MethodGet, sink: ok, wantStatus: 405, wantReason: push.ReasonMethod},
		{name: "bad request", kind: push.KindLoki, body: []byte(secret), sink: ok, wantStatus: 400, wantReason: push.ReasonBadRequest},
		{name: "bad media type", kind: push.KindLoki, body: body, headers: []string{"Content-Type", "text/csv"}, sink: ok, wantStatus: 415, wantReason: push.ReasonUnsupportedMedia},
		{name: "too large", kind: push.KindNDJSON, body: []byte(`{"line":"` + strings.Repeat("x", 2<<20) + `"}`), sink: ok, wantStatus: 413, wantReason: push.ReasonTooLarge},
		{name: "sink unavailable", kind: push.KindLoki, body: body, wantStatus: 503, wantReason: push.ReasonUnavailable, wantEntries: 1,
			sink: func(context.Context, []push.Entry) error {
				return fmt.Errorf("clickhouse down and spool full: %w", push.ErrUnavailable)
			}},
		{name: "sink error", kind: push.KindLoki, body: body, wantStatus: 500, wantReason: push.ReasonSinkError, wantEntries: 1,
			sink: func(context.Context, []push.Entry) error { return errors.New("boom") }},
		{name: "sink panics", kind: push.KindLoki, body: body, wantStatus: 500, wantReason: push.ReasonPanic, wantEntries: 1,
			sink: func(_ context.Context, e []push.Entry) error { panic(e[0].Line) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			rec := &statsRecorder{}
			logger := slogTo(&logs)
			h := push.Handler(tc.kind, push.Limits{}, sinkFunc(tc.sink), logger, push.WithMetrics(rec), push.WithRetryAfter(1500e6))
			srv := httptest.NewServer(h)
			defer srv.Close()

			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, srv.URL, bytes.NewReader(tc.body))
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			respBody, _ := io.ReadAll(resp.Body)
			resp.Body.Close()

			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, respBody, tc.wantStatus)
			}
			if got := resp.Header.Get("Retry-After"); (tc.wantStatus == 503) != (got == "2") {
				t.Errorf("Retry-After = %q", got)
			}
			if strings.Contains(string(respBody), secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("request content leaked:\nresponse: %s\nlogs: %s", respBody, logs.String())
			}
			if len(rec.all) != 1 {
				t.Fatalf("got %d observations, want 1", len(rec.all))
			}
			st := rec.all[0]
			if st.Status != tc.wantStatus || st.Reason != tc.wantReason || st.Entries != tc.wantEntries || st.Kind != tc.kind {
				t.Errorf("stats = %+v", st)
			}
			if tc.wantStatus < 300 && len(tc.body) > 0 && (st.CompressedBytes != int64(len(tc.body)) || st.DecompressedBytes == 0) {
				t.Errorf("byte counts = %+v, body %d bytes", st, len(tc.body))
			}
		})
	}
}

// TestHandlerAcksOnlyAfterAccept checks the acknowledgement contract: no
// response is sent while Accept is still running.
func TestHandlerAcksOnlyAfterAccept(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	h := push.Handler(push.KindNDJSON, push.Limits{}, sinkFunc(func(context.Context, []push.Entry) error {
		close(entered)
		<-release
		return nil
	}), nil)
	srv := httptest.NewServer(h)
	defer srv.Close()

	done := make(chan int)
	go func() {
		resp, err := http.Post(srv.URL, "application/x-ndjson", strings.NewReader(`{"line":"x"}`))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-entered
	time.Sleep(50 * time.Millisecond) // time for a premature answer to arrive
	select {
	case code := <-done:
		t.Fatalf("answered %d before Accept returned", code)
	default:
	}
	close(release)
	if code := <-done; code != http.StatusNoContent {
		t.Fatalf("status = %d, want 204", code)
	}
}

func TestHandlerRejectsBadWiring(t *testing.T) {
	for name, f := range map[string]func(){
		"unknown kind": func() { push.Handler("otlp", push.Limits{}, &recordingSink{}, nil) },
		"nil sink":     func() { push.Handler(push.KindLoki, push.Limits{}, nil, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}
