package ingest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// NDJSON lines without "ts" are stored once however often the client
// retries the push: their identity is the stream, the text, the place in
// the push and the push's other timeless lines, not the arrival time.
func TestTimelessLinesSurviveRetries(t *testing.T) {
	db := testdb.New(t)
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sink := ingest.NewPushSink(db, sp, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /ingest/v1/lines", push.Handler(push.KindNDJSON, push.Limits{}, sink, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	drain := func() {
		if _, err := sink.Drain(context.Background()); err != nil {
			t.Fatalf("drain: %v", err)
		}
	}
	body := strings.Join([]string{
		`{"line":"worker ready","node":"nt","role":"decode"}`,
		`{"line":"cache warm","node":"nt","role":"decode"}`,
		`{"line":"worker ready","node":"nt","role":"decode"}`, // the same text again: a second line
	}, "\n")
	for try := 0; try < 3; try++ { // the first push and two retries, a second apart
		if code, msg := postLines(t, srv.URL, body); code != http.StatusNoContent {
			t.Fatalf("push %d: %d %s", try, code, msg)
		}
		drain()
		time.Sleep(1100 * time.Millisecond)
	}
	q := "SELECT count() FROM raw_lines FINAL WHERE node = 'nt'"
	if got := count(t, db, q); got != 3 {
		t.Errorf("after a push and two retries: %d rows, want 3", got)
	}
	if got := count(t, db, "SELECT argMax(lines, version) FROM ingest_sources WHERE node = 'nt'"); got != 3 {
		t.Errorf("ingest_sources counts %d lines, want 3", got)
	}
	// A different push is new data, even with a line equal to one before.
	if code, msg := postLines(t, srv.URL, `{"line":"worker ready","node":"nt","role":"decode"}`); code != http.StatusNoContent {
		t.Fatalf("new push: %d %s", code, msg)
	}
	drain()
	if got := count(t, db, q); got != 4 {
		t.Errorf("after a different push: %d rows, want 4", got)
	}
}

// A timestamp kvtrail cannot store is never stored as if it were right:
// at the push it is refused with the reason; inside a line (an SGLang
// line dated 9999) the line is kept, flagged malformed with the reason,
// at the push's time, and yields no typed row.
func TestOutOfRangeTimestamps(t *testing.T) {
	db := testdb.New(t)
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sink := ingest.NewPushSink(db, sp, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /ingest/v1/lines", push.Handler(push.KindNDJSON, push.Limits{}, sink, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, tc := range []struct{ ts, want string }{
		{`"9999-12-31T23:59:59Z"`, "9999-12-31T23:59:59Z is outside the storable range"},
		{`"2262-04-12T00:00:00Z"`, "outside the storable range"},
		{`-1`, "1969-12-31T23:59:59Z is outside the storable range"},
		{`"1969-12-31T23:59:59.999Z"`, "outside the storable range"},
	} {
		code, msg := postLines(t, srv.URL, `{"ts":`+tc.ts+`,"line":"x","node":"nr","role":"prefill"}`)
		if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("ts %s: %d %q, want 400 with %q", tc.ts, code, msg, tc.want)
		}
	}
	// The epoch itself is a storable time.
	if code, msg := postLines(t, srv.URL, `{"ts":0,"line":"epoch","node":"nr","role":"prefill"}`); code != http.StatusNoContent {
		t.Fatalf("ts 0: %d %s", code, msg)
	}
	pushTS := time.Date(2026, 7, 5, 10, 0, 0, 0, time.UTC)
	line := "[9999-12-31 23:59:59 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 10, #cached-token: 0, token usage: 0.41, #running-req: 1, #queue-req: 0"
	ok := "[2026-07-05 10:00:01 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 11, #cached-token: 0, token usage: 0.41, #running-req: 1, #queue-req: 0"
	body := `{"ts":"` + pushTS.Format(time.RFC3339) + `","line":"` + line + `","node":"nr","role":"prefill","format":"sglang"}` + "\n" +
		`{"ts":"` + pushTS.Format(time.RFC3339) + `","line":"` + ok + `","node":"nr","role":"prefill","format":"sglang"}`
	if code, msg := postLines(t, srv.URL, body); code != http.StatusNoContent {
		t.Fatalf("push: %d %s", code, msg)
	}
	if _, err := sink.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	var status, reason string
	var ts time.Time
	var tsNS uint64
	err = db.QueryRow(context.Background(), "SELECT parse_status, parse_error, ts, ts_ns FROM raw_lines FINAL WHERE node = 'nr' AND line LIKE '[9999-%'").Scan(&status, &reason, &ts, &tsNS)
	if err != nil {
		t.Fatal(err)
	}
	if status != "malformed" || !strings.Contains(reason, "9999-12-31T23:59:59Z is outside the storable range") {
		t.Errorf("line dated 9999: status %q reason %q, want malformed with the reason", status, reason)
	}
	if !ts.Equal(pushTS) || tsNS != uint64(pushTS.UnixNano()) {
		t.Errorf("line dated 9999 stored at %s (%d ns), want the push's time %s", ts, tsNS, pushTS)
	}
	if got := count(t, db, "SELECT count() FROM batch_stats FINAL WHERE node = 'nr'"); got != 1 {
		t.Errorf("batch_stats rows = %d, want 1 (only the line with a storable time)", got)
	}
	if got := count(t, db, "SELECT count() FROM raw_lines FINAL WHERE node = 'nr' AND line = 'epoch' AND ts_ns = 0 AND toUInt32(ts) = 0"); got != 1 {
		t.Errorf("epoch line rows = %d, want 1 at 1970-01-01T00:00:00Z", got)
	}
}
