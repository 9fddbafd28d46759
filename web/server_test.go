package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fakePinger struct{ err error }

func (f fakePinger) Ping(context.Context) error { return f.err }

func TestOperationalEndpoints(t *testing.T) {
	tests := []struct {
		name     string
		db       Pinger
		path     string
		want     int
		contains string
	}{
		{"healthz", nil, "/healthz", 200, `"status":"ok"`},
		{"ready", fakePinger{}, "/readyz", 200, `"status":"ready"`},
		{"not ready", fakePinger{errors.New("connection refused")}, "/readyz", 503, "connection refused"},
		{"no db", nil, "/readyz", 503, "not configured"},
		{"metrics", fakePinger{}, "/metrics", 200, "go_goroutines"},
		{"unknown", nil, "/nope", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(New(Options{DB: tt.db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
			defer srv.Close()
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("GET %s = %d, want %d: %s", tt.path, resp.StatusCode, tt.want, body)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Fatalf("GET %s body lacks %q: %s", tt.path, tt.contains, body)
			}
		})
	}
}

func TestRequestMetricsCounted(t *testing.T) {
	srv := httptest.NewServer(New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	for i := 0; i < 3; i++ {
		r, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	r, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(body), `kvtrail_http_requests_total{method="GET",route="/healthz",status="200"} 3`) {
		t.Fatalf("metrics do not count the three /healthz requests:\n%s", body)
	}
}

func TestRequestLogOmitsQuery(t *testing.T) {
	var buf strings.Builder
	srv := httptest.NewServer(New(Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))}))
	defer srv.Close()
	r, err := http.Get(srv.URL + "/healthz?tenant=acme-secret-customer")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if strings.Contains(buf.String(), "acme-secret-customer") {
		t.Fatalf("request log leaks the query string: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "route=/healthz") {
		t.Fatalf("request log lacks the route: %s", buf.String())
	}
}
