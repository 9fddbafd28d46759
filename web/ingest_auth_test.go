package web

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/grafana/loki-client-go/loki"
	"github.com/grafana/loki-client-go/pkg/backoff"
	"github.com/grafana/loki-client-go/pkg/urlutil"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/config"
)

type countingSink struct {
	mu sync.Mutex
	n  int
}

func (s *countingSink) Accept(_ context.Context, es []push.Entry) error {
	s.mu.Lock()
	s.n += len(es)
	s.mu.Unlock()
	return nil
}

func ingestServer(t *testing.T) (*httptest.Server, *countingSink) {
	t.Helper()
	hash := func(name string) config.Secret { return config.Secret(apitoken.Hash(testToken(name))) }
	cfg := config.Auth{LoginAttempts: 50, LoginWindow: time.Minute, Tokens: []config.Token{
		{Name: "shipper", Role: "ingester", TokenHash: hash("ship")},
		{Name: "ops", Role: "admin", TokenHash: hash("admin")},
		{Name: "dash", Role: "viewer", TokenHash: hash("viewer")},
	}}
	guard, err := IngestAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/ingest/v1/lines", guard, gin.WrapH(push.Handler(push.KindNDJSON, push.Limits{}, sink, nil)))
	r.POST("/loki/api/v1/push", guard, gin.WrapH(push.Handler(push.KindLoki, push.Limits{}, sink, nil)))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, sink
}

func TestIngestAuth(t *testing.T) {
	srv, sink := ingestServer(t)
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	tests := []struct {
		name, auth string
		want       int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"viewer may not push", "Bearer " + testToken("viewer"), http.StatusForbidden},
		{"ingester bearer", "Bearer " + testToken("ship"), http.StatusNoContent},
		{"admin bearer", "Bearer " + testToken("admin"), http.StatusNoContent},
		{"ingester as basic-auth password", basic("promtail", testToken("ship")), http.StatusNoContent},
		{"garbage basic", "Basic !!!", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ingest/v1/lines", strings.NewReader(`{"line":"secret prompt text","node":"n"}`+"\n"))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if strings.Contains(string(body[:n]), "secret prompt") {
				t.Fatalf("response echoes the pushed line: %s", body[:n])
			}
		})
	}
	if sink.n != 3 {
		t.Fatalf("sink got %d lines, want 3 (only the authorised pushes)", sink.n)
	}
}

// The real Loki client with a bearer token (promtail's bearer_token).
func TestIngestAuthWithLokiClient(t *testing.T) {
	srv, sink := ingestServer(t)
	send := func(token string) {
		u, _ := url.Parse(srv.URL + "/loki/api/v1/push")
		c, err := loki.New(loki.Config{
			URL: urlutil.URLValue{URL: u}, BatchWait: 10 * time.Millisecond, BatchSize: 1 << 20, Timeout: 5 * time.Second,
			BackoffConfig: backoff.BackoffConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxRetries: 1},
			Client:        commoncfg.HTTPClientConfig{BearerToken: commoncfg.Secret(token)},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			_ = c.Handle(model.LabelSet{"node": "p0"}, time.Now(), "line")
		}
		c.Stop()
	}
	send("wrong")
	if sink.n != 0 {
		t.Fatalf("unauthorised client delivered %d lines", sink.n)
	}
	send(testToken("ship"))
	if sink.n != 5 {
		t.Fatalf("authorised client delivered %d lines, want 5", sink.n)
	}
}
