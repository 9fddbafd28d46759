package push

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"strings"
	"time"
)

// ndjsonLine is one line of an NDJSON push; see the package documentation.
type ndjsonLine struct {
	Ts       json.RawMessage   `json:"ts"`
	Line     json.RawMessage   `json:"line"`
	Labels   map[string]string `json:"labels"`
	Node     *string           `json:"node"`
	Role     *string           `json:"role"`
	Format   *string           `json:"format"`
	Metadata map[string]string `json:"metadata"`
}

// ndjsonTypes are the accepted Content-Types; NDJSON has no single
// registered one and shippers send all of these.
var ndjsonTypes = map[string]bool{
	"application/x-ndjson": true, "application/ndjson": true, "application/jsonl": true,
	"application/x-jsonlines": true, "application/json": true, "text/plain": true,
}

// DecodeNDJSON decodes newline-delimited JSON (see the package
// documentation). Errors wrap ErrTooLarge, ErrBadRequest or
// ErrUnsupportedMediaType and name the 1-based line number.
func DecodeNDJSON(r *http.Request, lim Limits) ([]Entry, error) {
	entries, _, err := decodeNDJSON(r, lim.withDefaults(), time.Now())
	return entries, err
}

func decodeNDJSON(r *http.Request, lim Limits, now time.Time) ([]Entry, sizes, error) {
	var sz sizes
	t, err := tenant(r)
	if err != nil {
		return nil, sz, err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return nil, sz, fmt.Errorf("%w: malformed Content-Type", ErrUnsupportedMediaType)
		}
		if !ndjsonTypes[mt] {
			return nil, sz, fmt.Errorf("%w: Content-Type %s (want application/x-ndjson)", ErrUnsupportedMediaType, quoteHeader(mt))
		}
	}
	body, sz, err := readBody(r, lim)
	if err != nil {
		return nil, sz, err
	}
	b := builder{lim: lim, tenant: t}
	now = now.UTC()
	for n := 1; len(body) > 0; n++ {
		var raw []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			raw, body = body[:i], body[i+1:]
		} else {
			raw, body = body, nil
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := b.ndjsonLine(raw, n, now); err != nil {
			return nil, sz, err
		}
	}
	return b.out, sz, nil
}

func (b *builder) ndjsonLine(raw []byte, n int, now time.Time) error {
	var l ndjsonLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("%w: line %d: %s", ErrBadRequest, n, jsonError(err))
	}
	if l.Line == nil {
		return fmt.Errorf("%w: line %d: missing \"line\"", ErrBadRequest, n)
	}
	line, ok := unquoteLine(l.Line)
	if !ok {
		return fmt.Errorf("%w: line %d: \"line\" must be a JSON string", ErrBadRequest, n)
	}
	ts, err := ndjsonTime(l.Ts, now)
	if err != nil {
		return fmt.Errorf("%w: line %d: \"ts\": %v", ErrBadRequest, n, err)
	}
	stream := make(map[string]string, len(l.Labels)+3)
	for k, v := range l.Labels {
		stream[k] = v
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"node", l.Node}, {"role", l.Role}, {"format", l.Format}} {
		if f.v != nil {
			stream[f.name] = *f.v
		}
	}
	// Consecutive lines of one stream share one map, as Loki pushes do:
	// a map per line would cost more than the line itself.
	if n := len(b.out); n > 0 && maps.Equal(b.out[n-1].Stream, stream) {
		stream = b.out[n-1].Stream
	}
	if err := b.add(stream, ts, line, l.Metadata, func() string { return fmt.Sprintf("line %d", n) }); err != nil {
		return err
	}
	if ts.Equal(now) && (len(bytes.TrimSpace(l.Ts)) == 0 || string(bytes.TrimSpace(l.Ts)) == "null") {
		b.out[len(b.out)-1].NoTS = true
	}
	return nil
}

// ndjsonTime interprets "ts": absent or null means now, a string is RFC
// 3339, a number is epoch seconds.
func ndjsonTime(raw json.RawMessage, now time.Time) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return now, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, fmt.Errorf("not a JSON string")
		}
		ts, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
		if err != nil {
			// time.ParseError quotes the input; say what was expected instead.
			return time.Time{}, fmt.Errorf("not an RFC 3339 timestamp")
		}
		return ts.UTC(), nil
	}
	if raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
		return parseEpochSeconds(string(raw))
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 string or epoch seconds")
}
