package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// FieldMapping maps a canonical gateway field (see GatewayFields) to a
// dotted JSON path in the user's log, e.g. "tenant": "headers.x-tenant-id",
// "ts": "start_time". Keys that contain dots themselves are matched too
// ("upstream.host" in {"upstream.host": …}). Unmapped fields use their
// canonical name.
type FieldMapping map[string]string

// GatewayFields are the canonical response fields (docs/formats.md,
// gateway_responses).
var GatewayFields = []string{"ts", "request_id", "tenant", "model", "status", "prompt_tokens",
	"completion_tokens", "cached_tokens", "ttft_ms", "duration_ms", "prefill_endpoint",
	"decode_endpoint", "bootstrap_room", "prefill_rid", "decode_rid", "gateway"}

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
	doc, err := decodeJSONObject(line)
	if err != nil {
		return malformed(KindGateway, "", "gateway json: "+err.Error())
	}
	g := &GatewayResponse{Gateway: p.m.Gateway}
	var ts time.Time
	var bad string
	for i, f := range GatewayFields {
		v, ok := lookupPath(doc, p.paths[i])
		if !ok || v == nil {
			continue
		}
		if err := p.set(g, &ts, f, v); err != nil && bad == "" {
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

func (p *gatewayParser) set(g *GatewayResponse, ts *time.Time, f string, v any) error {
	str := func() string {
		switch x := v.(type) {
		case string:
			return x
		case json.Number:
			return x.String()
		case bool:
			return strconv.FormatBool(x)
		}
		return ""
	}
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

func (p *gatewayParser) parseTS(v any) (time.Time, error) {
	tf := p.m.TimeFormat
	switch x := v.(type) {
	case json.Number:
		t, ok := epochString(x.String(), strings.TrimPrefix(strings.TrimPrefix(tf, "unix"), "_"))
		if !ok {
			return time.Time{}, fmt.Errorf("field ts: bad epoch %s", x)
		}
		return t, nil
	case string:
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
	return time.Time{}, fmt.Errorf("field ts: unsupported JSON type %T", v)
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
