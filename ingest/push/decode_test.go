package push_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	logproto "github.com/grafana/loki/pkg/push"

	"github.com/kvtrail/kvtrail/ingest/push"
)

// secret stands for a customer prompt: it is in every malformed body and
// must never appear in an error.
const secret = "SECRET-PROMPT-3f9a"

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)

const (
	ctProto = "application/x-protobuf"
	ctJSON  = "application/json"
)

type decodeCase struct {
	name    string
	req     *http.Request
	lim     push.Limits
	want    []push.Entry // in order
	wantErr error        // sentinel, nil for success
}

func runDecodeCases(t *testing.T, decode func(*http.Request, push.Limits) ([]push.Entry, error), cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(tc.req, tc.lim)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				t.Logf("error: %v", err)
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error echoes the body: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d entries, want %d: %+v", len(got), len(tc.want), got)
			}
			for i := range got {
				if g, w := entryKey(got[i]), entryKey(tc.want[i]); g != w {
					t.Errorf("entry %d:\n got %q\nwant %q", i, g, w)
				}
			}
		})
	}
}

func TestDecodeLoki(t *testing.T) {
	labels := map[string]string{"job": "sglang", "node": "n1"}
	protoBody := MustProtoBody(t, logproto.Stream{
		Labels: `{job="sglang", node="n1"}`,
		Entries: []logproto.Entry{
			{Timestamp: t0, Line: "prefill done"},
			{Timestamp: t0.Add(time.Second), Line: "kv transfer", StructuredMetadata: logproto.LabelsAdapter{{Name: "rid", Value: "r1"}}},
		},
	})
	protoWant := []push.Entry{
		{Stream: labels, Ts: t0, Line: "prefill done"},
		{Stream: labels, Ts: t0.Add(time.Second), Line: "kv transfer", Metadata: map[string]string{"rid": "r1"}},
	}
	jsonBody := []byte(`{"streams":[{"stream":{"job":"sglang","node":"n1"},"values":[
		["1714564800123456789","prefill done"],
		["1714564801123456789","kv transfer",{"rid":"r1"}]]}]}`)
	invalidUTF8 := "bad \xff\xfe utf8 " + secret
	jsonInvalid := []byte(`{"streams":[{"stream":{"job":"j"},"values":[["1714564800123456789","` + invalidUTF8 + `"]]}]}`)
	protoInvalid := MustProtoBody(t, logproto.Stream{Labels: `{job="j"}`, Entries: []logproto.Entry{{Timestamp: t0, Line: invalidUTF8}}})
	withTenant := func(es []push.Entry, tenant string) []push.Entry {
		out := append([]push.Entry(nil), es...)
		for i := range out {
			out[i].Tenant = tenant
		}
		return out
	}
	bigLine := strings.Repeat("x", 1025)
	bigLineBody := MustProtoBody(t, logproto.Stream{Labels: `{job="j"}`, Entries: []logproto.Entry{{Timestamp: t0, Line: bigLine}}})
	exactLine := MustProtoBody(t, logproto.Stream{Labels: `{job="j"}`, Entries: []logproto.Entry{{Timestamp: t0, Line: bigLine[:1024]}}})
	zeros := make([]byte, 2<<20)
	// A forged snappy header declaring 1 GiB of output, followed by junk.
	snappyBomb := binary.AppendUvarint(nil, 1<<30)
	snappyBomb = append(snappyBomb, secret...)
	small := push.Limits{MaxDecompressedBytes: 1 << 20, MaxCompressedBytes: 64 << 10, MaxLineBytes: 1024, MaxEntries: 2}

	runDecodeCases(t, push.DecodeLoki, []decodeCase{
		{name: "protobuf", req: newReq(protoBody, "Content-Type", ctProto), want: protoWant},
		{name: "protobuf without Content-Type", req: newReq(protoBody), want: protoWant},
		{name: "protobuf gzip", req: newReq(gzipped(protoBody), "Content-Type", ctProto, "Content-Encoding", "gzip"), want: protoWant},
		{name: "json with structured metadata", req: newReq(jsonBody, "Content-Type", ctJSON), want: protoWant},
		{name: "json charset param", req: newReq(jsonBody, "Content-Type", "application/json; charset=utf-8"), want: protoWant},
		{name: "json gzip", req: newReq(gzipped(jsonBody), "Content-Type", ctJSON, "Content-Encoding", "gzip"), want: protoWant},
		{name: "json deflate zlib", req: newReq(zlibbed(jsonBody), "Content-Type", ctJSON, "Content-Encoding", "deflate"), want: protoWant},
		{name: "json deflate raw", req: newReq(deflated(jsonBody), "Content-Type", ctJSON, "Content-Encoding", "Deflate"), want: protoWant},
		{name: "json legacy shape", req: newReq([]byte(`{"streams":[{"labels":"{job=\"sglang\", node=\"n1\"}","entries":[
			{"ts":"2024-05-01T12:00:00.123456789Z","line":"prefill done"}]}]}`), "Content-Type", ctJSON), want: protoWant[:1]},
		{name: "json escapes", req: newReq([]byte(`{"streams":[{"stream":{},"values":[[1714564800123456789,"a\"b\\c\n\u00e9\ud83d\ude00\ud800x\/"]]}]}`), "Content-Type", ctJSON),
			want: []push.Entry{{Stream: map[string]string{}, Ts: t0, Line: "a\"b\\c\né😀\uFFFDx/"}}},
		{name: "tenant header", req: newReq(protoBody, "X-Scope-OrgID", "team-a"), want: withTenant(protoWant, "team-a")},
		{name: "invalid utf8 kept json", req: newReq(jsonInvalid, "Content-Type", ctJSON), want: []push.Entry{{Stream: map[string]string{"job": "j"}, Ts: t0, Line: invalidUTF8}}},
		{name: "invalid utf8 kept protobuf", req: newReq(protoInvalid), want: []push.Entry{{Stream: map[string]string{"job": "j"}, Ts: t0, Line: invalidUTF8}}},
		{name: "empty push", req: newReq([]byte(`{"streams":[]}`), "Content-Type", ctJSON)},
		{name: "line at limit", req: newReq(exactLine), lim: small, want: []push.Entry{{Stream: map[string]string{"job": "j"}, Ts: t0, Line: bigLine[:1024]}}},

		{name: "huge line", req: newReq(bigLineBody), lim: small, wantErr: push.ErrTooLarge},
		{name: "too many entries", req: newReq(MustProtoBody(t, logproto.Stream{Labels: `{a="b"}`, Entries: []logproto.Entry{{Timestamp: t0}, {Timestamp: t0}, {Timestamp: t0}}})), lim: small, wantErr: push.ErrTooLarge},
		{name: "compressed limit by Content-Length", req: newReq(make([]byte, 65<<10), "Content-Type", ctJSON), lim: small, wantErr: push.ErrTooLarge},
		{name: "compressed limit streamed", req: chunked(make([]byte, 65<<10), ctJSON), lim: small, wantErr: push.ErrTooLarge},
		{name: "gzip bomb", req: newReq(gzipped(zeros), "Content-Type", ctJSON, "Content-Encoding", "gzip"), lim: small, wantErr: push.ErrTooLarge},
		{name: "snappy bomb real", req: newReq(snappy.Encode(nil, zeros)), lim: push.Limits{MaxDecompressedBytes: 1 << 20}, wantErr: push.ErrTooLarge},
		{name: "snappy bomb forged header", req: newReq(snappyBomb), wantErr: push.ErrTooLarge},
		{name: "bad content type", req: newReq(jsonBody, "Content-Type", "text/html"), wantErr: push.ErrUnsupportedMediaType},
		{name: "malformed content type", req: newReq(jsonBody, "Content-Type", "application/json; ="), wantErr: push.ErrUnsupportedMediaType},
		{name: "unsupported encoding", req: newReq(jsonBody, "Content-Type", ctJSON, "Content-Encoding", "br"), wantErr: push.ErrUnsupportedMediaType},
		{name: "malformed gzip", req: newReq([]byte(secret), "Content-Type", ctJSON, "Content-Encoding", "gzip"), wantErr: push.ErrBadRequest},
		{name: "truncated gzip", req: newReq(gzipped(jsonBody)[:30], "Content-Type", ctJSON, "Content-Encoding", "gzip"), wantErr: push.ErrBadRequest},
		{name: "not snappy", req: newReq([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), wantErr: push.ErrBadRequest},
		{name: "malformed protobuf", req: newReq(snappy.Encode(nil, []byte("\x0a\xff"+secret))), wantErr: push.ErrBadRequest},
		{name: "malformed stream labels", req: newReq(MustProtoBody(t, logproto.Stream{Labels: `{job=` + secret + `}`, Entries: []logproto.Entry{{Timestamp: t0}}})), wantErr: push.ErrBadRequest},
		{name: "malformed json", req: newReq([]byte(`{"streams":[`+secret), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "json wrong type", req: newReq([]byte(`{"streams":[{"stream":{"`+secret+`":1}}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "json bad value arity", req: newReq([]byte(`{"streams":[{"stream":{},"values":[["1"]]}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "json bad timestamp", req: newReq([]byte(`{"streams":[{"stream":{},"values":[["`+secret+`","x"]]}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "json line not string", req: newReq([]byte(`{"streams":[{"stream":{},"values":[["1",{"a":"`+secret+`"}]]}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "json bad metadata", req: newReq([]byte(`{"streams":[{"stream":{},"values":[["1","x",["`+secret+`"]]]}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "json legacy bad ts", req: newReq([]byte(`{"streams":[{"labels":"{}","entries":[{"ts":"`+secret+`","line":"x"}]}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "invalid tenant", req: newReq(protoBody, "X-Scope-OrgID", "a/b"), wantErr: push.ErrBadRequest},
		{name: "protobuf year 9999", req: newReq(MustProtoBody(t, logproto.Stream{Labels: `{job="j"}`, Entries: []logproto.Entry{{Timestamp: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Line: secret}}})), wantErr: push.ErrBadRequest},
		{name: "protobuf before 1970", req: newReq(MustProtoBody(t, logproto.Stream{Labels: `{job="j"}`, Entries: []logproto.Entry{{Timestamp: time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC), Line: secret}}})), wantErr: push.ErrBadRequest},
		{name: "json negative ns", req: newReq([]byte(`{"streams":[{"stream":{},"values":[["-1","`+secret+`"]]}]}`), "Content-Type", ctJSON), wantErr: push.ErrBadRequest},
		{name: "tenant too long", req: newReq(protoBody, "X-Scope-OrgID", strings.Repeat("a", 151)), wantErr: push.ErrBadRequest},
	})
}

func TestDecodeNDJSON(t *testing.T) {
	invalidUTF8 := "bad \xff utf8"
	body := []byte(strings.Join([]string{
		`{"ts":"2024-05-01T12:00:00.123456789Z","line":"prefill done","labels":{"job":"sglang","node":"old"},"node":"n1","role":"prefill","format":"sglang","metadata":{"rid":"r1"}}`,
		``,
		`{"ts":1714564801.123456789,"line":"` + invalidUTF8 + `","labels":{"job":"sglang"}}` + "\r",
		`{"ts":1714564802,"line":"int seconds"}`,
		`{"ts":"2024-05-01T14:00:00.123456789+02:00","line":"offset tz","node":"n2"}`,
	}, "\n"))
	want := []push.Entry{
		{Stream: map[string]string{"job": "sglang", "node": "n1", "role": "prefill", "format": "sglang"}, Ts: t0, Line: "prefill done", Metadata: map[string]string{"rid": "r1"}, Tenant: "t1"},
		{Stream: map[string]string{"job": "sglang"}, Ts: t0.Add(time.Second), Line: invalidUTF8, Tenant: "t1"},
		{Stream: map[string]string{}, Ts: time.Unix(1714564802, 0), Line: "int seconds", Tenant: "t1"},
		{Stream: map[string]string{"node": "n2"}, Ts: t0, Line: "offset tz", Tenant: "t1"},
	}
	small := push.Limits{MaxLineBytes: 8, MaxEntries: 2}
	line := func(s string) []byte { return []byte(s) }

	runDecodeCases(t, push.DecodeNDJSON, []decodeCase{
		{name: "all fields", req: newReq(body, "Content-Type", "application/x-ndjson", "X-Scope-OrgID", "t1"), want: want},
		{name: "no content type", req: newReq(body, "X-Scope-OrgID", "t1"), want: want},
		{name: "gzip", req: newReq(gzipped(body), "Content-Encoding", "gzip", "X-Scope-OrgID", "t1"), want: want},
		{name: "deflate", req: newReq(deflated(body), "Content-Encoding", "deflate", "X-Scope-OrgID", "t1"), want: want},
		{name: "empty body", req: newReq(nil)},
		// The storable range's edges: the epoch itself and the last day
		// ClickHouse DateTime holds are kept; a second outside is refused
		// (before, 1969 was clamped to 1970 and 9999 to 2105, silently).
		{name: "epoch zero", req: newReq(line(`{"ts":0,"line":"x"}`)),
			want: []push.Entry{{Stream: map[string]string{}, Ts: time.Unix(0, 0), Line: "x"}}},
		{name: "1970 rfc3339", req: newReq(line(`{"ts":"1970-01-01T00:00:00Z","line":"x"}`)),
			want: []push.Entry{{Stream: map[string]string{}, Ts: time.Unix(0, 0), Line: "x"}}},
		{name: "last storable day", req: newReq(line(`{"ts":"2105-12-31T00:00:00Z","line":"x"}`)),
			want: []push.Entry{{Stream: map[string]string{}, Ts: push.MaxTime, Line: "x"}}},
		{name: "negative fractional epoch", req: newReq(line(`{"ts":-1.5,"line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "one ns before the epoch", req: newReq(line(`{"ts":"1969-12-31T23:59:59.999999999Z","line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "year 9999", req: newReq(line(`{"ts":"9999-12-31T23:59:59Z","line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "year 2262 ts_ns overflow", req: newReq(line(`{"ts":"2262-04-12T00:00:00Z","line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "after 2105", req: newReq(line(`{"ts":"2105-12-31T00:00:01Z","line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "epoch seconds year 5000", req: newReq(line(`{"ts":95617584000,"line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "exponent epoch", req: newReq(line(`{"ts":1.7145648e9,"line":"x"}`)),
			want: []push.Entry{{Stream: map[string]string{}, Ts: time.Unix(1714564800, 0), Line: "x"}}},

		{name: "missing line", req: newReq(line(`{"ts":1}`)), wantErr: push.ErrBadRequest},
		{name: "line not string", req: newReq(line(`{"line":["` + secret + `"]}`)), wantErr: push.ErrBadRequest},
		{name: "bad ts string", req: newReq(line(`{"ts":"` + secret + `","line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "bad ts type", req: newReq(line(`{"ts":true,"line":"x"}`)), wantErr: push.ErrBadRequest},
		{name: "malformed json line", req: newReq(line(`{"line":"ok"}` + "\n{" + secret)), wantErr: push.ErrBadRequest},
		{name: "labels wrong type", req: newReq(line(`{"line":"x","labels":{"a":` + "12345" + `}}`)), wantErr: push.ErrBadRequest},
		{name: "bad content type", req: newReq(line(`{"line":"x"}`), "Content-Type", "application/x-protobuf"), wantErr: push.ErrUnsupportedMediaType},
		{name: "huge line", req: newReq(line(`{"line":"123456789"}`)), lim: small, wantErr: push.ErrTooLarge},
		{name: "too many entries", req: newReq(line("{\"line\":\"a\"}\n{\"line\":\"b\"}\n{\"line\":\"c\"}")), lim: small, wantErr: push.ErrTooLarge},
		{name: "gzip bomb", req: newReq(gzipped(bytes.Repeat([]byte(" "), 2<<20)), "Content-Encoding", "gzip"), lim: push.Limits{MaxDecompressedBytes: 1 << 20}, wantErr: push.ErrTooLarge},
	})
}

func TestDecodeNDJSONMissingTsIsNow(t *testing.T) {
	before := time.Now()
	got, err := push.DecodeNDJSON(newReq([]byte(`{"line":"x"}`)), push.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Ts.Before(before) || got[0].Ts.After(time.Now()) {
		t.Fatalf("ts = %v, want receipt time", got)
	}
}

func TestNDJSONErrorNamesLine(t *testing.T) {
	_, err := push.DecodeNDJSON(newReq([]byte("{\"line\":\"ok\"}\n\n{\"line\":3}")), push.Limits{})
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want it to name line 3", err)
	}
}

// chunked returns a request without Content-Length, so the limit must be
// enforced while reading.
func chunked(body []byte, ct string) *http.Request {
	r := newReq(nil, "Content-Type", ct)
	r.Body = readCloser{bytes.NewReader(body)}
	r.ContentLength = -1
	return r
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
