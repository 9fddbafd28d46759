package web

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Extra readiness checks (the push spool) appear in /readyz under their
// name, and an unready one makes it 503 even when ClickHouse answers.
func TestReadyChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready bool
		want  int
	}{{"draining", true, 200}, {"nearly full", false, 503}} {
		t.Run(tc.name, func(t *testing.T) {
			check := func() (string, any, bool) {
				return "spool", map[string]any{"status": tc.name, "drain_lag_seconds": 12.5}, tc.ready
			}
			srv := httptest.NewServer(New(Options{DB: fakePinger{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				ReadyChecks: []ReadyCheck{check}}))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Status     string `json:"status"`
				ClickHouse string `json:"clickhouse"`
				Spool      struct {
					Status string  `json:"status"`
					Lag    float64 `json:"drain_lag_seconds"`
				} `json:"spool"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want || body.ClickHouse != "ok" || body.Spool.Status != tc.name || body.Spool.Lag != 12.5 {
				t.Fatalf("GET /readyz = %d %+v, want %d with the spool's state", resp.StatusCode, body, tc.want)
			}
		})
	}
}
