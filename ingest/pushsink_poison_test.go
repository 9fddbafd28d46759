package ingest_test

import (
	"bytes"
	"context"
	"encoding/gob"
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

func postLines(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/ingest/v1/lines", "application/x-ndjson", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// drainUntil drains until the spool is empty or the deadline passes.
func drainUntil(t *testing.T, sink *ingest.PushSink, sp *spool.Spool, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for sp.Len() > 0 && time.Now().Before(deadline) {
		_, _ = sink.Drain(context.Background())
		time.Sleep(50 * time.Millisecond)
	}
}

// The exact repro: a push with an unknown format label, then a
// valid one. The poison push is refused with the reason; the valid line is
// stored and nothing stays in the spool.
func TestPoisonPushIsRefusedAndDoesNotBlock(t *testing.T) {
	s := testdb.New(t)
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sink := ingest.NewPushSink(s, sp, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /ingest/v1/lines", push.Handler(push.KindNDJSON, push.Limits{}, sink, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, msg := postLines(t, srv.URL, `{"line":"a","node":"pz","format":"json"}`)
	if code != http.StatusBadRequest || !strings.Contains(msg, `format "json"`) {
		t.Errorf("poison push: %d %q, want 400 naming the unknown format", code, msg)
	}
	code, msg = postLines(t, srv.URL, `{"line":"b","node":"pz","role":"prefill","format":"sglang"}`)
	if code != http.StatusNoContent {
		t.Fatalf("valid push: %d %q", code, msg)
	}
	drainUntil(t, sink, sp, 10*time.Second)
	if n := sp.Len(); n != 0 {
		t.Errorf("spool records after drain = %d, want 0", n)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE node = 'pz' AND line = 'b'"); got != 1 {
		t.Errorf("valid line stored %d times, want 1", got)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"line":"a","node":"pz","role":"cook","format":"sglang"}`, `role "cook"`},
		{`{"line":"a","role":"prefill","format":"sglang"}`, "node"},
	} {
		if code, msg := postLines(t, srv.URL, bad.body); code != http.StatusBadRequest || !strings.Contains(msg, bad.want) {
			t.Errorf("push %s: %d %q, want 400 naming %s", bad.body, code, msg, bad.want)
		}
	}
}

// A spool written by an older kvtrail can hold a record no drain can ever
// store (here: the repro's unknown format, accepted before labels were
// validated). It must not block the records behind it, across restarts.
func TestPoisonSpoolRecordIsQuarantined(t *testing.T) {
	s := testdb.New(t)
	dir := filepath.Join(t.TempDir(), "spool")
	sp, err := spool.Open(dir, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	poison := []push.Entry{{Stream: map[string]string{"node": "pz", "format": "json"}, Ts: time.Now().UTC(), Line: "a"}}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(poison); err != nil {
		t.Fatal(err)
	}
	if err := sp.Append(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	sink := ingest.NewPushSink(s, sp, nil)
	ok := []push.Entry{{Stream: map[string]string{"node": "pz", "role": "prefill", "format": "sglang"}, Ts: time.Now().UTC(), Line: "b"}}
	if err := sink.Accept(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	drainUntil(t, sink, sp, 20*time.Second)
	if n := sp.Len(); n != 0 {
		t.Errorf("spool records after drain = %d, want 0 (the poison one quarantined)", n)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE node = 'pz' AND line = 'b'"); got != 1 {
		t.Errorf("line behind the poison record stored %d times, want 1", got)
	}
	sp.Close()
}
