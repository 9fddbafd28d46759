package parse

import (
	"fmt"
	"time"
)

// Parser parses the Records of one source. Implementations never panic on
// any input and never drop a record: unreadable input is StatusMalformed.
//
// Strings of a Parsed may share memory with rec.Raw (the parsers read the
// record in place instead of copying every line): the caller must not
// modify rec.Raw after Parse. Reader returns every Record in memory of its
// own, so records from a Reader can be kept as they are.
type Parser interface {
	Parse(rec Record) Parsed
}

// ParseOptions configure the parsers of one source.
type ParseOptions struct {
	// Location interprets timestamps that carry no zone (SGLang, glog,
	// sgl-model-gateway text). Nil means UTC.
	Location *time.Location
	// ClockOffset is added to every timestamp of the source (to correct a
	// skewed node clock): true time = logged time + ClockOffset.
	ClockOffset time.Duration
	// Year completes glog short-form dates (Lmmdd). 0 means infer (see
	// glogParser).
	Year int
	// DefaultTime is the time of Prometheus samples without a timestamp,
	// and the fallback year source for glog (e.g. the file's mtime).
	DefaultTime time.Time
	// Gateway maps a user's JSON access log onto the canonical gateway
	// response; nil means the canonical field names.
	Gateway *GatewayMapping
}

func (o ParseOptions) loc() *time.Location {
	if o.Location == nil {
		return time.UTC
	}
	return o.Location
}

// fix applies the clock offset and normalises to UTC.
func (o ParseOptions) fix(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(o.ClockOffset).UTC()
}

// New returns the Parser for format: one format's parser, without line
// classification. Ingest uses NewClassifier.
func New(format Format, opts ParseOptions) (Parser, error) {
	spec, ok := formatSpecs[format]
	if !ok {
		return nil, fmt.Errorf("parse.New: unsupported format %q", format)
	}
	return spec.newParser(opts)
}

func unknown(reason string) Parsed { return Parsed{Status: StatusUnknown, Reason: reason} }

func malformed(kind Kind, event, reason string) Parsed {
	return Parsed{Status: StatusMalformed, Kind: kind, Event: event, Reason: reason}
}
