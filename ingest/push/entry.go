package push

import (
	"errors"
	"fmt"
	"time"
)

// Entry is one decoded log line.
//
// Entries decoded from the same stream share one Stream map; treat Stream
// and Metadata as read-only.
type Entry struct {
	Stream   map[string]string // stream labels
	Ts       time.Time         // UTC
	Line     string            // exactly as sent, invalid UTF-8 included
	Metadata map[string]string // per-entry structured metadata, nil if none
	Tenant   string            // X-Scope-OrgID, "" if absent
	// NoTS is set when the client sent no timestamp (NDJSON without "ts"):
	// Ts is then the time the request arrived, not a time the client gave.
	NoTS bool
}

// The range of times kvtrail can store (ClickHouse DateTime, and ts_ns in
// nanoseconds, which overflows int64 after 2262). A pushed timestamp
// outside it is refused rather than clamped into a wrong time.
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Date(2105, 12, 31, 0, 0, 0, 0, time.UTC)
)

// CheckTime reports why t cannot be stored, or nil.
func CheckTime(t time.Time) error {
	if t.Before(MinTime) || t.After(MaxTime) {
		return fmt.Errorf("timestamp %s is outside the storable range %s to %s",
			t.UTC().Format(time.RFC3339Nano), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return nil
}

// Default limits. The decompressed cap is 10x the compressed one because
// log text compresses about that well; Loki uses a similar ratio.
const (
	DefaultMaxCompressedBytes   = 10 << 20
	DefaultMaxDecompressedBytes = 100 << 20
	DefaultMaxEntries           = 1_000_000
	DefaultMaxLineBytes         = 1 << 20
)

// Limits bound what one request may cost. A zero or negative field means
// its default.
type Limits struct {
	MaxCompressedBytes   int64 // body bytes on the wire
	MaxDecompressedBytes int64 // after Content-Encoding and snappy
	MaxEntries           int   // entries per request
	MaxLineBytes         int   // bytes in one log line

	res *reservation // this request's share of the handler's Budget
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{}.withDefaults()
}

func (l Limits) withDefaults() Limits {
	if l.MaxCompressedBytes <= 0 {
		l.MaxCompressedBytes = DefaultMaxCompressedBytes
	}
	if l.MaxDecompressedBytes <= 0 {
		l.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = DefaultMaxLineBytes
	}
	return l
}

// Error kinds. Decode errors wrap exactly one of the first three, so a
// handler can map them with errors.Is. Their messages describe the problem
// (sizes, offsets, field names) but never quote the body.
var (
	ErrTooLarge             = errors.New("request too large")      // 413
	ErrBadRequest           = errors.New("bad request")            // 400
	ErrUnsupportedMediaType = errors.New("unsupported media type") // 415

	// ErrUnavailable is wrapped by a Sink that cannot take data right now
	// (ClickHouse down and spool full); the handler answers 503 with
	// Retry-After so that clients retry instead of dropping.
	ErrUnavailable = errors.New("sink unavailable")
)
