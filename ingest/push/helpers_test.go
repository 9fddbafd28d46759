package push_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	logproto "github.com/grafana/loki/pkg/push"

	"github.com/kvtrail/kvtrail/ingest/push"
)

// recordingSink remembers accepted entries; err, if set, is returned
// instead.
type recordingSink struct {
	mu      sync.Mutex
	err     error
	entries []push.Entry
	calls   int
}

func (s *recordingSink) Accept(_ context.Context, e []push.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return s.err
	}
	s.entries = append(s.entries, e...)
	return nil
}

func (s *recordingSink) got() []push.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// MustProtoBody returns a snappy-compressed PushRequest.
func MustProtoBody(tb testing.TB, streams ...logproto.Stream) []byte {
	tb.Helper()
	req := logproto.PushRequest{Streams: streams}
	raw, err := req.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return snappy.Encode(nil, raw)
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zlibbed(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func deflated(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// newReq builds a POST request; headers is alternating name, value.
func newReq(body []byte, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/push", bytes.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

// entryKey renders an entry canonically, for order-insensitive comparison.
func entryKey(e push.Entry) string {
	var b strings.Builder
	b.WriteString(e.Tenant + "|" + e.Ts.UTC().Format(time.RFC3339Nano) + "|" + e.Line + "|")
	for _, m := range []map[string]string{e.Stream, e.Metadata} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString(k + "=" + m[k] + ",")
		}
		b.WriteString("|")
	}
	return b.String()
}

func sameEntries(t *testing.T, got, want []push.Entry) {
	t.Helper()
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i] = entryKey(got[i])
	}
	for i := range want {
		w[i] = entryKey(want[i])
	}
	sort.Strings(g)
	sort.Strings(w)
	if !slices.Equal(g, w) {
		t.Errorf("entries differ:\n got %q\nwant %q", g, w)
	}
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
