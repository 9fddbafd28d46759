package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
)

// DecodeLoki decodes a Loki push request (protobuf or JSON, see the package
// documentation). Errors wrap ErrTooLarge, ErrBadRequest or
// ErrUnsupportedMediaType.
func DecodeLoki(r *http.Request, lim Limits) ([]Entry, error) {
	entries, _, err := decodeLoki(r, lim.withDefaults())
	return entries, err
}

func decodeLoki(r *http.Request, lim Limits) ([]Entry, sizes, error) {
	var sz sizes
	t, err := tenant(r)
	if err != nil {
		return nil, sz, err
	}
	// Like Loki: no Content-Type means protobuf.
	mt := "application/x-protobuf"
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return nil, sz, fmt.Errorf("%w: malformed Content-Type", ErrUnsupportedMediaType)
		}
	}
	if mt != "application/x-protobuf" && mt != "application/json" {
		return nil, sz, fmt.Errorf("%w: Content-Type %s (want application/x-protobuf or application/json)", ErrUnsupportedMediaType, quoteHeader(mt))
	}
	body, sz, err := readBody(r, lim)
	if err != nil {
		return nil, sz, err
	}
	b := builder{lim: lim, tenant: t}
	if mt == "application/json" {
		err = b.lokiJSON(body)
	} else {
		var n int64
		n, err = b.lokiProto(body, lim)
		sz.decompressed = n
	}
	if err != nil {
		return nil, sz, err
	}
	return b.out, sz, nil
}

// builder accumulates entries and enforces the per-entry limits.
type builder struct {
	lim    Limits
	tenant string
	out    []Entry
}

func (b *builder) add(stream map[string]string, ts time.Time, line string, meta map[string]string, where func() string) error {
	if len(b.out) >= b.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, b.lim.MaxEntries)
	}
	if len(line) > b.lim.MaxLineBytes {
		return fmt.Errorf("%w: %s: line is %d bytes, limit is %d", ErrTooLarge, where(), len(line), b.lim.MaxLineBytes)
	}
	if err := CheckTime(ts); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadRequest, where(), err)
	}
	if len(meta) == 0 {
		meta = nil
	}
	b.out = append(b.out, Entry{Stream: stream, Ts: ts, Line: line, Metadata: meta, Tenant: b.tenant})
	return nil
}

// lokiProto decodes a snappy block holding a PushRequest and returns its
// decoded size.
func (b *builder) lokiProto(body []byte, lim Limits) (int64, error) {
	// A snappy block declares its decoded length up front: check it before
	// allocating, so a 10 MiB bomb cannot ask for gigabytes.
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return 0, fmt.Errorf("%w: malformed snappy block", ErrBadRequest)
	}
	if int64(n) > lim.MaxDecompressedBytes {
		return int64(n), fmt.Errorf("%w: snappy block declares %d decoded bytes, limit is %d", ErrTooLarge, n, lim.MaxDecompressedBytes)
	}
	if err := lim.res.grow(int64(n)); err != nil {
		return int64(n), err
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return int64(n), fmt.Errorf("%w: malformed snappy block", ErrBadRequest)
	}
	var req push.PushRequest
	// The gogo error text is numeric only, but it is left out anyway: the
	// rule is that no decoder-produced text reaches the client.
	if err := req.Unmarshal(raw); err != nil {
		return int64(n), fmt.Errorf("%w: malformed protobuf PushRequest", ErrBadRequest)
	}
	for si := range req.Streams {
		s := &req.Streams[si]
		labels, err := parseLabels(s.Labels)
		if err != nil {
			return int64(n), fmt.Errorf("%w: stream %d: %v", ErrBadRequest, si, err)
		}
		for ei := range s.Entries {
			e := &s.Entries[ei]
			var meta map[string]string
			if len(e.StructuredMetadata) > 0 {
				meta = make(map[string]string, len(e.StructuredMetadata))
				for _, l := range e.StructuredMetadata {
					meta[l.Name] = l.Value
				}
			}
			if err := b.add(labels, e.Timestamp.UTC(), e.Line, meta, at(si, ei)); err != nil {
				return int64(n), err
			}
		}
	}
	return int64(n), nil
}

func at(stream, entry int) func() string {
	return func() string { return fmt.Sprintf("stream %d entry %d", stream, entry) }
}

// jsonPush is Loki's JSON push body. Lines and timestamps stay raw: lines
// so invalid UTF-8 survives (see unquoteLine), timestamps because clients
// send both strings and numbers.
type jsonPush struct {
	Streams []jsonStream `json:"streams"`
}

type jsonStream struct {
	Stream map[string]string   `json:"stream"`
	Values [][]json.RawMessage `json:"values"`

	// Legacy shape, still sent by loki-client-go in JSON mode.
	Labels  *string           `json:"labels"`
	Entries []jsonLegacyEntry `json:"entries"`
}

type jsonLegacyEntry struct {
	Ts   time.Time       `json:"ts"`
	Line json.RawMessage `json:"line"`
}

func (b *builder) lokiJSON(body []byte) error {
	var req jsonPush
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("%w: %s", ErrBadRequest, jsonError(err))
	}
	for si, s := range req.Streams {
		labels := s.Stream
		if s.Labels != nil {
			var err error
			if labels, err = parseLabels(*s.Labels); err != nil {
				return fmt.Errorf("%w: stream %d: %v", ErrBadRequest, si, err)
			}
		}
		if labels == nil {
			labels = map[string]string{}
		}
		for ei, v := range s.Values {
			if len(v) != 2 && len(v) != 3 {
				return fmt.Errorf("%w: stream %d value %d: want [ts, line] or [ts, line, metadata], got %d elements", ErrBadRequest, si, ei, len(v))
			}
			ts, err := parseUnixNanos(v[0])
			if err != nil {
				return fmt.Errorf("%w: stream %d value %d: %v", ErrBadRequest, si, ei, err)
			}
			line, ok := unquoteLine(v[1])
			if !ok {
				return fmt.Errorf("%w: stream %d value %d: line is not a JSON string", ErrBadRequest, si, ei)
			}
			var meta map[string]string
			if len(v) == 3 {
				if err := json.Unmarshal(v[2], &meta); err != nil {
					return fmt.Errorf("%w: stream %d value %d: structured metadata must be an object of strings", ErrBadRequest, si, ei)
				}
			}
			if err := b.add(labels, ts, line, meta, at(si, ei)); err != nil {
				return err
			}
		}
		for ei, e := range s.Entries {
			line, ok := unquoteLine(e.Line)
			if !ok {
				return fmt.Errorf("%w: stream %d entry %d: line is not a JSON string", ErrBadRequest, si, ei)
			}
			if err := b.add(labels, e.Ts.UTC(), line, nil, at(si, ei)); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonError describes an encoding/json error by position only: the error's
// own text may quote the body (a SyntaxError quotes a character, an
// UnmarshalTypeError a number or a map key, time.ParseError the input).
func jsonError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte offset %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("JSON value of the wrong type at byte offset %d", typ.Offset)
	default:
		return "malformed JSON"
	}
}
