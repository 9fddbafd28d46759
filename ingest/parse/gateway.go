package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// FieldMapping maps a canonical gateway field (see GatewayFields) to a
// dotted JSON path in the user's log, e.g. "tenant": "headers.x-tenant-id",
// "ts": "start_time". Keys that contain dots themselves are matched too
// ("upstream.host" in {"upstream.host": …}). Unmapped fields use their
// canonical name.
type FieldMapping map[string]string

// GatewayFields are the canonical response fields (docs/formats.md,
// gateway_responses).
var GatewayFields = gatewayFieldNames[:]

// GatewayMapping adapts a JSON access log (nginx, Envoy, own) to the
// canonical gateway response without code.
type GatewayMapping struct {
	Fields FieldMapping
	// TimeFormat of the ts field: "" accepts RFC 3339 strings and epoch
	// numbers (unit guessed from magnitude); "unix", "unix_ms", "unix_us",
	// "unix_ns" force an epoch unit; anything else is a Go time layout
	// (zone-less layouts use ParseOptions.Location).
	TimeFormat string
	// DurationUnit of the ttft_ms / duration_ms sources: "ms" (default),
	// "s", "us" or "ns".
	DurationUnit string
	// Gateway names the gateway when the log has no such field.
	Gateway string
}

type gatewayParser struct {
	opts  ParseOptions
	paths [][]string // per GatewayFields index: the path split at dots
	m     GatewayMapping
	scale float64 // duration unit → ms
	arena arena
	// flat: every path is one key, so a line can be read by scanning its
	// top-level object (gatewayFlat) instead of decoding it into maps.
	flat bool
}

func newGatewayParser(opts ParseOptions) (*gatewayParser, error) {
	p := &gatewayParser{opts: opts, scale: 1}
	if opts.Gateway != nil {
		p.m = *opts.Gateway
	}
	for k := range p.m.Fields {
		if !isGatewayField(k) {
			return nil, fmt.Errorf("parse.New(gateway): unknown canonical field %q in mapping", k)
		}
	}
	switch p.m.DurationUnit {
	case "", "ms":
	case "s":
		p.scale = 1000
	case "us", "µs":
		p.scale = 1e-3
	case "ns":
		p.scale = 1e-6
	default:
		return nil, fmt.Errorf("parse.New(gateway): unknown duration unit %q", p.m.DurationUnit)
	}
	for _, f := range GatewayFields {
		path := f
		if m, ok := p.m.Fields[f]; ok && m != "" {
			path = m
		}
		p.paths = append(p.paths, strings.Split(path, "."))
	}
	p.flat = true
	for _, path := range p.paths {
		p.flat = p.flat && len(path) == 1
	}
	return p, nil
}

func isGatewayField(k string) bool {
	for _, f := range GatewayFields {
		if f == k {
			return true
		}
	}
	return false
}

func (p *gatewayParser) Parse(rec Record) Parsed {
	line := bytes.TrimSpace(rec.Raw)
	if len(line) == 0 {
		return unknown("empty line")
	}
	var vals [len(gatewayFieldNames)]gwValue
	if !p.flat || !gatewayFlat(bytesView(line), p.paths, &vals) {
		// Anything the scan does not read exactly as encoding/json does
		// (escapes, nesting in a wanted field, a mapped path, bad JSON)
		// is decoded in full.
		doc, err := decodeJSONObject(line)
		if err != nil {
			return malformed(KindGateway, "", "gateway json: "+err.Error())
		}
		for i := range GatewayFields {
			v, ok := lookupPath(doc, p.paths[i])
			if !ok || v == nil {
				vals[i] = gwValue{}
				continue
			}
			vals[i] = anyValue(v)
		}
	}
	g := p.arena.gateway()
	g.Gateway = p.m.Gateway
	var ts time.Time
	var bad string
	for i, f := range GatewayFields {
		if vals[i].kind == gwAbsent {
			continue
		}
		if err := p.set(g, &ts, f, vals[i]); err != nil && bad == "" {
			bad = err.Error()
		}
	}
	out := Parsed{Status: StatusParsed, Kind: KindGateway, Event: "response", Gateway: g,
		TS: p.opts.fix(ts), RID: g.RequestID, BootstrapRoom: g.BootstrapRoom}
	switch {
	case bad != "":
		out.Status, out.Reason = StatusMalformed, bad
	case ts.IsZero():
		out.Status, out.Reason = StatusMalformed, "gateway line without ts"
	}
	return out
}

func (p *gatewayParser) set(g *GatewayResponse, ts *time.Time, f string, v gwValue) error {
	str := func() string { return v.s }
	u64 := func(dst *uint64) error {
		n, err := strconv.ParseUint(str(), 10, 64)
		if err != nil {
			fl, ferr := strconv.ParseFloat(str(), 64)
			if ferr != nil || fl < 0 || fl >= math.MaxUint64 {
				return fmt.Errorf("field %s: not a count: %q", f, str())
			}
			n = uint64(fl)
		}
		*dst = n
		return nil
	}
	ms := func(dst *float64) error {
		fl, err := strconv.ParseFloat(strings.TrimSuffix(str(), "ms"), 64)
		if err != nil {
			return fmt.Errorf("field %s: not a number: %q", f, str())
		}
		*dst = fl * p.scale
		return nil
	}
	switch f {
	case "ts":
		t, err := p.parseTS(v)
		if err != nil {
			return err
		}
		*ts = t
	case "request_id":
		g.RequestID = str()
	case "tenant":
		g.Tenant = str()
	case "model":
		g.Model = str()
	case "status":
		var n uint64
		if err := u64(&n); err != nil || n > 999 {
			return fmt.Errorf("field status: not an HTTP status: %q", str())
		}
		g.Status = uint16(n)
	case "prompt_tokens":
		return u64(&g.PromptTokens)
	case "completion_tokens":
		return u64(&g.CompletionTokens)
	case "cached_tokens":
		return u64(&g.CachedTokens)
	case "ttft_ms":
		return ms(&g.TTFTMs)
	case "duration_ms":
		return ms(&g.DurationMs)
	case "prefill_endpoint":
		g.PrefillEndpoint = str()
	case "decode_endpoint":
		g.DecodeEndpoint = str()
	case "bootstrap_room":
		// Exact: json.Number keeps all 63 bits (§e).
		n, err := strconv.ParseUint(str(), 10, 64)
		if err != nil {
			return fmt.Errorf("field bootstrap_room: %q is not a 64-bit room", str())
		}
		g.BootstrapRoom = n
	case "prefill_rid":
		g.PrefillRID = str()
	case "decode_rid":
		g.DecodeRID = str()
	case "gateway":
		g.Gateway = str()
	}
	return nil
}

func (p *gatewayParser) parseTS(v gwValue) (time.Time, error) {
	tf := p.m.TimeFormat
	switch x := v.s; v.kind {
	case gwNumber:
		t, ok := epochString(x, strings.TrimPrefix(strings.TrimPrefix(tf, "unix"), "_"))
		if !ok {
			return time.Time{}, fmt.Errorf("field ts: bad epoch %s", x)
		}
		return t, nil
	case gwString:
		switch {
		case strings.HasPrefix(tf, "unix"):
			u := strings.TrimPrefix(strings.TrimPrefix(tf, "unix"), "_")
			if u == "" {
				u = "s"
			}
			t, ok := epochString(x, u)
			if !ok {
				return time.Time{}, fmt.Errorf("field ts: bad epoch %q", x)
			}
			return t, nil
		case tf != "":
			t, err := time.ParseInLocation(tf, x, p.opts.loc())
			if err != nil {
				return time.Time{}, fmt.Errorf("field ts: %w", err)
			}
			return t, nil
		}
		if t, ok := parseISO(x, p.opts.loc()); ok {
			return t, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t, nil
		}
		if t, ok := epochString(x, ""); ok {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("field ts: unrecognised time %q", x)
	}
	return time.Time{}, fmt.Errorf("field ts: unsupported JSON type %s", v.typ)
}

// decodeJSONObject decodes one JSON object keeping numbers exact.
func decodeJSONObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return doc, nil
}

// lookupPath follows a dotted path, trying the longest dotted key first at
// each level so keys containing dots still match.
func lookupPath(v any, path []string) (any, bool) {
	if len(path) == 0 {
		return v, true
	}
	m, ok := v.(map[string]any)
	if !ok {
		if a, ok := v.([]any); ok {
			if i, err := strconv.Atoi(path[0]); err == nil && i >= 0 && i < len(a) {
				return lookupPath(a[i], path[1:])
			}
		}
		return nil, false
	}
	for n := len(path); n >= 1; n-- {
		key := strings.Join(path[:n], ".")
		if x, ok := m[key]; ok {
			if r, ok := lookupPath(x, path[n:]); ok {
				return r, true
			}
		}
	}
	return nil, false
}

// gwValue is one JSON value of a gateway line, as set reads it: s is the
// text of a string, number or bool ("" for objects and arrays).
type gwValue struct {
	kind byte   // gwAbsent (missing or null), gwString, gwNumber, gwOther
	s    string // string text, number literal, "true"/"false"
	typ  string // the Go type encoding/json decodes the value to, for errors
}

const (
	gwAbsent byte = iota
	gwString
	gwNumber
	gwOther
)

// gatewayFieldNames are GatewayFields as an array, which sizes the
// per-line value array of Parse.
var gatewayFieldNames = [...]string{"ts", "request_id", "tenant", "model", "status", "prompt_tokens",
	"completion_tokens", "cached_tokens", "ttft_ms", "duration_ms", "prefill_endpoint",
	"decode_endpoint", "bootstrap_room", "prefill_rid", "decode_rid", "gateway"}

// anyValue converts a value of decodeJSONObject.
func anyValue(v any) gwValue {
	switch x := v.(type) {
	case string:
		return gwValue{kind: gwString, s: x, typ: "string"}
	case json.Number:
		return gwValue{kind: gwNumber, s: x.String(), typ: "json.Number"}
	case bool:
		return gwValue{kind: gwOther, s: strconv.FormatBool(x), typ: "bool"}
	}
	return gwValue{kind: gwOther, typ: fmt.Sprintf("%T", v)}
}

// gatewayFlat reads the top-level object of line into vals (indexed like
// paths, each a single key) without decoding it into maps. It reports
// false whenever its reading could differ from decodeJSONObject plus
// lookupPath, and the caller then decodes the line in full: strings with
// escapes, control characters or invalid UTF-8, a wanted field holding an
// object or array, deep nesting, and anything that is not valid JSON.
// Like json.Decoder, it ignores what follows the object. A key given twice
// keeps its last value, as a map does.
func gatewayFlat(line string, paths [][]string, vals *[len(gatewayFieldNames)]gwValue) bool {
	s := jsonScan{s: line}
	if !s.byte('{') {
		return false
	}
	s.ws()
	if s.peek() == '}' {
		return true
	}
	for {
		s.ws()
		key, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if !s.byte(':') {
			return false
		}
		s.ws()
		want := -1
		for i, p := range paths {
			if p[0] == key {
				want = i
				break
			}
		}
		var v gwValue
		switch c := s.peek(); {
		case c == '"':
			str, ok := s.str()
			if !ok {
				return false
			}
			v = gwValue{kind: gwString, s: str, typ: "string"}
		case c == '-' || (c >= '0' && c <= '9'):
			num, ok := s.number()
			if !ok {
				return false
			}
			v = gwValue{kind: gwNumber, s: num, typ: "json.Number"}
		case c == 't' || c == 'f':
			lit := "true"
			if c == 'f' {
				lit = "false"
			}
			if !s.lit(lit) {
				return false
			}
			v = gwValue{kind: gwOther, s: lit, typ: "bool"}
		case c == 'n':
			if !s.lit("null") {
				return false
			}
		case c == '{' || c == '[':
			if want >= 0 || !s.skip(0) {
				return false
			}
		default:
			return false
		}
		if want >= 0 {
			// Every path naming this key gets the value (a mapping may
			// read one key twice).
			for i, p := range paths {
				if p[0] == key {
					vals[i] = v
				}
			}
		}
		s.ws()
		switch s.next() {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}

// jsonScan is a strict scanner over the JSON subset gatewayFlat reads.
type jsonScan struct {
	s string
	i int
}

func (s *jsonScan) peek() byte {
	if s.i < len(s.s) {
		return s.s[s.i]
	}
	return 0
}

func (s *jsonScan) next() byte {
	c := s.peek()
	s.i++
	return c
}

func (s *jsonScan) byte(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

func (s *jsonScan) ws() {
	for s.i < len(s.s) {
		switch s.s[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScan) lit(l string) bool {
	if !strings.HasPrefix(s.s[s.i:], l) {
		return false
	}
	s.i += len(l)
	return true
}

// str reads a string without escapes, control characters or invalid
// UTF-8 (whose decoding encoding/json would change).
func (s *jsonScan) str() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	ascii := true
	for s.i < len(s.s) {
		c := s.s[s.i]
		switch {
		case c == '"':
			out := s.s[start:s.i]
			s.i++
			return out, ascii || utf8.ValidString(out)
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.i++
	}
	return "", false
}

// number reads a JSON number literal (json.Number keeps its text).
func (s *jsonScan) number() (string, bool) {
	start := s.i
	s.byte('-')
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		for s.i < len(s.s) && s.s[s.i] >= '0' && s.s[s.i] <= '9' {
			s.i++
		}
	default:
		return "", false
	}
	if s.byte('.') {
		if !s.digits() {
			return "", false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return "", false
		}
	}
	return s.s[start:s.i], true
}

func (s *jsonScan) digits() bool {
	start := s.i
	for s.i < len(s.s) && s.s[s.i] >= '0' && s.s[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// skip reads a nested object or array of values this scanner accepts.
func (s *jsonScan) skip(depth int) bool {
	if depth > 64 {
		return false
	}
	open := s.next()
	close := byte('}')
	if open == '[' {
		close = ']'
	}
	s.ws()
	if s.byte(close) {
		return true
	}
	for {
		s.ws()
		if open == '{' {
			if _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if !s.byte(':') {
				return false
			}
			s.ws()
		}
		var ok bool
		switch c := s.peek(); {
		case c == '"':
			_, ok = s.str()
		case c == '-' || (c >= '0' && c <= '9'):
			_, ok = s.number()
		case c == 't':
			ok = s.lit("true")
		case c == 'f':
			ok = s.lit("false")
		case c == 'n':
			ok = s.lit("null")
		case c == '{' || c == '[':
			ok = s.skip(depth + 1)
		}
		if !ok {
			return false
		}
		s.ws()
		switch s.next() {
		case ',':
		case close:
			return true
		default:
			return false
		}
	}
}
