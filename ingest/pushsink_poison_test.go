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
	dead, err := spool.Open(filepath.Join(dir, "dead-letter"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	sink := ingest.NewPushSink(s, sp, nil, ingest.WithDeadLetter(dead))
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
	if st := sink.Stats(); st.Quarantined != 1 || st.DeadLetterRecords != 1 || !strings.Contains(st.Recent[0].Reason, `format "json" is unknown`) {
		t.Errorf("stats %+v: want the poison push quarantined, kept and its reason shown", st)
	}
	sp.Close()
}

// answeringStore answers pings but fails every read and write: to the
// drain, every spooled push looks unstorable while ClickHouse is up.
type answeringStore struct{ downStore }

func (answeringStore) Ping(context.Context) error { return nil }

// A push whose writes keep failing while ClickHouse answers is isolated
// (the batch is halved until it is alone), tried maxTries times, moved to
// the dead letter with the reason and reported; the dead letter can be
// requeued once the cause is fixed. During an outage (no answer to the
// ping) nothing is quarantined, however long it lasts.
func TestWriteFailuresQuarantineAfterTries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sp, err := spool.Open(filepath.Join(dir, "spool"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	dead, err := spool.Open(filepath.Join(dir, "spool", "dead-letter"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	entry := func(i int) []push.Entry {
		return []push.Entry{{Stream: map[string]string{"node": "q", "role": "decode"}, Ts: time.Unix(1783296000+int64(i), 0).UTC(), Line: "x"}}
	}
	// An outage: many attempts, nothing quarantined.
	down := ingest.NewPushSink(downStore{}, sp, nil, ingest.WithDeadLetter(dead), ingest.WithMaxTries(2))
	for i := 0; i < 3; i++ {
		if err := down.Accept(ctx, entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := down.Drain(ctx); err == nil {
			t.Fatal("drain into a down ClickHouse succeeded")
		}
	}
	if sp.Len() != 3 || dead.Len() != 0 {
		t.Fatalf("after an outage: spool %d, dead letter %d; want 3 and 0", sp.Len(), dead.Len())
	}
	// ClickHouse answers but refuses writes for less than the quarantine
	// age (default 1 minute): tries pile up, nothing is quarantined.
	patient := ingest.NewPushSink(answeringStore{}, sp, nil, ingest.WithDeadLetter(dead), ingest.WithMaxTries(2))
	for i := 0; i < 30; i++ {
		_, _ = patient.Drain(ctx)
	}
	if sp.Len() != 3 || dead.Len() != 0 {
		t.Fatalf("refused for seconds only: spool %d, dead letter %d; want 3 and 0", sp.Len(), dead.Len())
	}
	// ClickHouse answers but refuses them: isolated, tried, quarantined.
	var hooked []ingest.Quarantined
	sink := ingest.NewPushSink(answeringStore{}, sp, nil, ingest.WithDeadLetter(dead), ingest.WithMaxTries(2),
		ingest.WithQuarantineAfter(0), ingest.WithQuarantineHook(func(q ingest.Quarantined) { hooked = append(hooked, q) }))
	for i := 0; i < 50 && sp.Len() > 0; i++ {
		_, _ = sink.Drain(ctx)
	}
	if sp.Len() != 0 || dead.Len() != 3 {
		t.Fatalf("spool %d, dead letter %d; want 0 and 3", sp.Len(), dead.Len())
	}
	st := sink.Stats()
	if st.Quarantined != 3 || st.DeadLetterRecords != 3 || len(hooked) != 3 || len(st.Recent) != 3 {
		t.Fatalf("stats %+v, hook calls %d; want 3 quarantined, reported and visible", st, len(hooked))
	}
	if r := st.Recent[0].Reason; !strings.Contains(r, "write failed 2 times over") || !strings.Contains(r, "while ClickHouse answered") {
		t.Errorf("reason %q", r)
	}
	// The cause fixed (here: the same spool, requeued), they come back.
	n, err := sink.Requeue(ctx, dead)
	if err != nil || n != 3 || sp.Len() != 3 || dead.Len() != 0 {
		t.Fatalf("requeue: %d %v; spool %d dead %d", n, err, sp.Len(), dead.Len())
	}
}
