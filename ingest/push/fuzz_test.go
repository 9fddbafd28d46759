package push_test

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/golang/snappy"
	logproto "github.com/grafana/loki/pkg/push"

	"github.com/kvtrail/kvtrail/ingest/push"
)

// fuzzLimits are small so the fuzzer reaches the limit checks too.
var fuzzLimits = push.Limits{MaxCompressedBytes: 1 << 20, MaxDecompressedBytes: 1 << 20, MaxEntries: 1000, MaxLineBytes: 4096}

// checkDecoded asserts the invariants every decode must keep: a typed error
// or entries within the limits.
func checkDecoded(t *testing.T, entries []push.Entry, err error) {
	if err != nil {
		if !errors.Is(err, push.ErrBadRequest) && !errors.Is(err, push.ErrTooLarge) && !errors.Is(err, push.ErrUnsupportedMediaType) {
			t.Fatalf("untyped error: %v", err)
		}
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("error is not valid UTF-8, so it quotes input: %q", err)
		}
		return
	}
	if len(entries) > fuzzLimits.MaxEntries {
		t.Fatalf("%d entries", len(entries))
	}
	for _, e := range entries {
		if len(e.Line) > fuzzLimits.MaxLineBytes || e.Stream == nil {
			t.Fatalf("bad entry %+v", e)
		}
	}
}

func FuzzDecodeLokiJSON(f *testing.F) {
	f.Add([]byte(`{"streams":[{"stream":{"job":"x"},"values":[["1714564800123456789","line"],["1","l",{"k":"v"}]]}]}`))
	f.Add([]byte(`{"streams":[{"labels":"{job=\"x\"}","entries":[{"ts":"2024-05-01T12:00:00Z","line":"a\u00e9\ud800"}]}]}`))
	f.Add([]byte(`{"streams":[{"stream":{},"values":[[1,"\xff"]]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := push.DecodeLoki(newReq(body, "Content-Type", ctJSON), fuzzLimits)
		checkDecoded(t, entries, err)
	})
}

func FuzzDecodeLokiProto(f *testing.F) {
	f.Add(MustProtoBody(f, logproto.Stream{Labels: `{job="x", q="a\"b"}`, Entries: []logproto.Entry{
		{Timestamp: t0, Line: "l", StructuredMetadata: logproto.LabelsAdapter{{Name: "k", Value: "v"}}},
	}}), false)
	f.Add([]byte("\x0a\x05{a=\"\"}"), true)
	f.Fuzz(func(t *testing.T, body []byte, compress bool) {
		// compress=true wraps the input in valid snappy, so the fuzzer can
		// reach the protobuf and label parsers; false fuzzes snappy itself.
		if compress {
			body = snappy.Encode(nil, body)
		}
		entries, err := push.DecodeLoki(newReq(body, "Content-Type", ctProto), fuzzLimits)
		checkDecoded(t, entries, err)
	})
}

func FuzzDecodeNDJSON(f *testing.F) {
	f.Add([]byte(`{"ts":"2024-05-01T12:00:00Z","line":"x","labels":{"a":"b"},"node":"n","role":"r","format":"f","metadata":{"k":"v"}}` + "\n" + `{"ts":1.5,"line":"y"}`))
	f.Add([]byte(`{"ts":-1e300,"line":"\ud800"}`))
	f.Add([]byte("{\"line\":\"\xff\"}\r\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := push.DecodeNDJSON(newReq(body), fuzzLimits)
		checkDecoded(t, entries, err)
	})
}
