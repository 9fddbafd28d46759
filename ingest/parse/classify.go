package parse

import (
	"bytes"
	"strings"
)

// Classifier parses a mixed stream: every record is classified by the shape
// of its own first line (registry.go) and read by that family's parser. A
// real SGLang process writes one stream that interleaves its Python logging,
// Mooncake glog lines, uvicorn access lines, progress bars, NCCL/Gloo/NIXL
// lines and tracebacks; a file that starts with glog lines must still get
// its "KV Cache is allocated" line parsed.
//
// The source's declared or detected format (the hint) only breaks ties:
// its families are tried first, and a line of no known shape goes to its
// parser after the SGLang message parser (bare messages without a prefix).
// Nothing is ever rejected: a line nothing recognises is StatusUnknown.
type Classifier struct {
	hint    Format
	opts    ParseOptions
	parsers map[Format]Parser // one per format, created on first use (they keep per-stream state)
	// glogSeen: the stream holds glog lines, so full timestamps of other
	// lines are passed to the glog parser as its year.
	glogSeen bool
}

// NewClassifier returns a Classifier for a source whose format is hint
// (FormatUnknown when it could not be detected). It fails only for a hint
// that is not a format, or a gateway mapping New rejects.
func NewClassifier(hint Format, opts ParseOptions) (*Classifier, error) {
	c := &Classifier{hint: hint, opts: opts, parsers: map[Format]Parser{}}
	if hint == "" {
		c.hint = FormatUnknown
	}
	if c.hint != FormatUnknown {
		if _, err := c.parser(c.hint); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Classifier) parser(f Format) (Parser, error) {
	if f == FormatSGLangJSON {
		f = FormatSGLang // one parser, one state
	}
	if p, ok := c.parsers[f]; ok {
		return p, nil
	}
	p, err := New(f, c.opts)
	if err != nil {
		return nil, err
	}
	c.parsers[f] = p
	return p, nil
}

// Parse classifies and parses one record.
func (c *Classifier) Parse(rec Record) Parsed {
	// Classification only looks at the first line: a view of the record,
	// never kept, so classifying costs no copy of the line.
	line := firstLineView(rec.Raw)
	if k := stripWrapper(line); k > 0 {
		inner := rec
		inner.Raw = rec.Raw[k:]
		out := c.Parse(inner)
		if out.Family == "" {
			out.Family = "wrapped"
		}
		if len(bytes.TrimSpace(inner.Raw)) == 0 {
			out.Status, out.Family = StatusNoise, "wrapped"
		}
		return out
	}
	var out Parsed
	fam, known := promFamily, true
	if o, ok := c.repeatedSample(rec, line); ok {
		out = o
		out.Format = FormatPrometheus
	} else {
		fam, known = classifyLine(line, c.hint)
		out = c.parseAs(rec, fam, known)
	}
	if out.Status == StatusUnknown && rec.Lines > 1 && bytes.Contains(rec.Raw, tracebackHead) {
		// An error record with its traceback: evidence of a crash or a
		// failed request, read by people, with the exception as the note.
		out = Parsed{Status: StatusParsed, Kind: KindMarker, Event: "traceback", Reason: lastLine(rec.Raw),
			TS: out.TS, Format: out.Format, Family: out.Family}
	}
	if known {
		out.Family = fam.Name
		if out.Status == StatusUnknown && fam.Noise != nil && fam.Noise(line) {
			out.Status, out.Reason = StatusNoise, ""
		}
	}
	if out.Format == "" {
		out.Format = c.hint
	}
	if out.Format != FormatGlog && !out.TS.IsZero() {
		if g, ok := c.parsers[FormatGlog].(*glogParser); ok {
			g.observeYear(out.TS)
		} else if c.hint == FormatGlog || c.glogSeen {
			g, _ := c.parser(FormatGlog)
			g.(*glogParser).observeYear(out.TS)
		}
	}
	if out.Format == FormatGlog {
		c.glogSeen = true
	}
	return out
}

// parseAs parses a record of family fam (known false: of no known shape).
func (c *Classifier) parseAs(rec Record, fam Family, known bool) Parsed {
	var out Parsed
	switch {
	case known && fam.Format != "" && fam.Format != FormatUnknown:
		p, err := c.parser(fam.Format)
		if err != nil { // a format of the registry always builds; keep the line anyway
			out = unknown(err.Error())
			break
		}
		out = p.Parse(rec)
		out.Format = fam.Format
		if fam.Format == FormatSGLangJSON && c.hint != FormatSGLangJSON {
			out.Format = FormatSGLang
		}
	case known && fam.Marker != "":
		out = Parsed{Status: StatusParsed, Kind: KindMarker, Event: fam.Marker, Reason: lastLine(rec.Raw)}
	case known:
		out = unknown("")
	default:
		out = c.bare(rec)
	}
	return out
}

// promFastPath switches repeatedSample on; tests compare both ways.
var promFastPath = true

// promFamily is the registry's Prometheus family.
var promFamily = func() Family {
	for _, f := range families {
		if f.Name == "prometheus" {
			return f
		}
	}
	panic("parse: no prometheus family in the registry")
}()

// repeatedSample is the fast path of a metrics source, where a snapshot
// repeats every series in every scrape. A one-line record that starts like
// a sample of a series the Prometheus parser has read in full before is a
// Prometheus line exactly when its value part reads, which is what the
// parser's cached path checks; so the line is parsed once instead of
// checked by isPrometheus and then parsed. ok is false when the fast path
// does not apply, and the caller classifies the line as usual (the
// parser's state is unchanged then).
func (c *Classifier) repeatedSample(rec Record, line string) (Parsed, bool) {
	if !promFastPath || c.hint != FormatPrometheus || line == "" || !(isIdentStart(line[0]) || line[0] == ':') ||
		bytes.IndexByte(rec.Raw, '\n') >= 0 {
		return Parsed{}, false
	}
	pp, ok := c.parsers[FormatPrometheus].(*promParser)
	if !ok {
		return Parsed{}, false
	}
	if key, ok := promSeriesKey(line); !ok || key == "" {
		return Parsed{}, false
	} else if _, hit := pp.series[key]; !hit {
		return Parsed{}, false
	}
	out := pp.Parse(rec)
	if out.Status != StatusParsed || out.Kind != KindMetric {
		return Parsed{}, false
	}
	return out, true
}

// bare handles a line of no known shape: a message without prefix (a
// copied excerpt, a print, a wrapped line), a JSON body, anything else.
func (c *Classifier) bare(rec Record) Parsed {
	sg, _ := c.parser(FormatSGLang)
	out := sg.Parse(rec)
	out.Family = "bare"
	if out.Status == StatusParsed {
		out.Format = FormatSGLang
		return out
	}
	if c.hint != FormatUnknown && !sameFormat(c.hint, FormatSGLang) {
		if p, err := c.parser(c.hint); err == nil {
			if h := p.Parse(rec); h.Status != StatusUnknown {
				h.Format, h.Family = c.hint, "bare"
				return h
			}
		}
	}
	if out.Status == StatusMalformed {
		out.Format = FormatSGLang
		return out
	}
	// A Mooncake message without its glog prefix (quoted in a report).
	if g := glogMessage(strings.TrimSpace(firstLine(rec.Raw))); g.Status == StatusParsed {
		g.Format, g.Family = FormatGlog, "bare"
		return g
	}
	if sglangNoise(firstLine(rec.Raw)) {
		return Parsed{Status: StatusNoise, Family: "bare"}
	}
	return out
}

func firstLine(raw []byte) string { return strings.Clone(firstLineView(raw)) }

// firstLineView is firstLine without the copy (see bytesView).
func firstLineView(raw []byte) string {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		raw = raw[:i]
	}
	return strings.TrimSuffix(bytesView(raw), "\r")
}

func lastLine(raw []byte) string {
	s := strings.TrimRight(string(raw), "\r\n ")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}
