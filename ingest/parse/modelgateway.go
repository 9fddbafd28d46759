package parse

import (
	"encoding/json"
	"strconv"
	"strings"
)

// modelGatewayParser parses sgl-model-gateway (ex sgl-router) logs (§f,
// last part): tracing text
//
//	2025-08-01 00:41:58  INFO sglang_router_rs::server: src/server.rs:265: Starting router …
//	2026-08-20 10:11:12.345  INFO http_request{method=POST uri=/generate version=HTTP/1.1 request_id="gnt-…" status_code=200 latency=1234}: smg::response: src/middleware.rs:1: finished processing request
//
// and tracing JSON (flatten_event) with request_id / status_code / latency
// (µs) in the event, its span or spans. Only "finished processing request"
// and "request failed with …" events carry a response; the router never
// logs bootstrap_room at INFO.
type modelGatewayParser struct{ opts ParseOptions }

func (p *modelGatewayParser) Parse(rec Record) Parsed {
	line := string(rec.Raw)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSuffix(line[:i], "\r")
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		return p.parseJSON(line)
	}
	ts, i, ok := parseDateTime(line, p.opts.loc())
	if !ok {
		return unknown("no gateway timestamp")
	}
	rest := strings.TrimLeft(line[i:], " ")
	level, rest, _ := strings.Cut(rest, " ")
	kv := func(k string) string {
		v, _ := spanField(rest, k)
		return v
	}
	out := p.response(strings.TrimSpace(rest), level, kv)
	out.TS = p.opts.fix(ts)
	return out
}

// spanField finds key=value in tracing text output; values may be quoted.
func spanField(s, key string) (string, bool) {
	for from := 0; from < len(s); {
		i := strings.Index(s[from:], key+"=")
		if i < 0 {
			return "", false
		}
		i += from
		if i > 0 && s[i-1] != ' ' && s[i-1] != '{' && s[i-1] != ',' {
			from = i + 1
			continue
		}
		v := s[i+len(key)+1:]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.QuotedPrefix(v); err == nil {
				s, _ := strconv.Unquote(u)
				return s, true
			}
		}
		if j := strings.IndexAny(v, " },"); j >= 0 {
			v = v[:j]
		}
		return v, true
	}
	return "", false
}

// routerErrors are the PD router's backend failures (sgl-router
// src/pd_router.rs v0.4.8 → sgl-model-gateway src/routers/http/pd_router.rs
// v0.5.12): the only router lines that tie a client failure to a prefill or
// decode server.
var routerErrors = [...]struct{ head, event, peerKey, peerStop string }{
	{"Stream error from decode server ", "decode_stream_error", "Stream error from decode server ", " "},
	{"Decode server returned error status ", "decode_error_status", "decode_url=", " "},
	{"Failed to read decode response", "decode_read_error", "", ""},
	{"Prefill server failed (CRITICAL)", "prefill_failed", "prefill_url=", " "},
	{"Prefill server returned error status ", "prefill_error_status", "prefill_url=", " "},
	{"Failed to proxy request server", "proxy_error", "", ""},
	{"Failed to select PD pair", "select_pair_error", "", ""},
}

func routerError(msg string) (Parsed, bool) {
	for _, h := range routerErrors {
		i := strings.Index(msg, h.head)
		if i < 0 {
			continue
		}
		t := &TransferEvent{Ranks: NoRanks, Source: "router", Event: h.event, MetadataIndex: -1, Reason: msg[i:]}
		if h.peerKey != "" {
			peer, _ := tokenAfter(msg[i:], h.peerKey, h.peerStop)
			t.Peer = strings.TrimSuffix(peer, ":")
		}
		return transferOut(t, ""), true
	}
	return Parsed{}, false
}

func (p *modelGatewayParser) response(msg, level string, field func(string) string) Parsed {
	if out, ok := routerError(msg); ok {
		return out
	}
	finished := strings.Contains(msg, "finished processing request") || strings.Contains(msg, "request failed with")
	if !finished {
		out := unknown("")
		if level == "ERROR" || level == "WARN" {
			out.Reason = "gateway " + strings.ToLower(level)
		}
		return out
	}
	g := &GatewayResponse{Gateway: "sgl-model-gateway", RequestID: field("request_id"),
		Method: field("method"), URI: field("uri")}
	out := Parsed{Status: StatusParsed, Kind: KindGateway, Event: "response", Gateway: g}
	if s := field("status_code"); s != "" {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil || n > 999 {
			out.Status, out.Reason = StatusMalformed, "bad status_code "+strconv.Quote(s)
		}
		g.Status = uint16(n)
	}
	if l := field("latency"); l != "" {
		g.DurationMs = latencyMs(l)
	}
	out.RID = g.RequestID
	return out
}

// latencyMs converts the span's latency: a bare number is µs (§f); Rust
// Debug durations ("1.234ms", "12µs", "1.5s") are honoured.
func latencyMs(v string) float64 {
	unit := 1e-3
	for _, s := range [...]struct {
		suf string
		m   float64
	}{{"ms", 1}, {"µs", 1e-3}, {"us", 1e-3}, {"ns", 1e-6}, {"s", 1000}} {
		if strings.HasSuffix(v, s.suf) {
			v, unit = strings.TrimSuffix(v, s.suf), s.m
			break
		}
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f * unit
}

func (p *modelGatewayParser) parseJSON(line string) Parsed {
	doc, err := decodeJSONObject([]byte(line))
	if err != nil {
		return malformed(KindGateway, "", "gateway tracing json: "+err.Error())
	}
	// Fields may sit at the top (flatten_event), under "fields", in "span"
	// or in any of "spans".
	scopes := []map[string]any{doc}
	for _, k := range [...]string{"fields", "span"} {
		if m, ok := doc[k].(map[string]any); ok {
			scopes = append(scopes, m)
		}
	}
	if a, ok := doc["spans"].([]any); ok {
		for _, s := range a {
			if m, ok := s.(map[string]any); ok {
				scopes = append(scopes, m)
			}
		}
	}
	field := func(k string) string {
		for _, m := range scopes {
			switch v := m[k].(type) {
			case string:
				return v
			case json.Number:
				return v.String()
			}
		}
		return ""
	}
	level := field("level")
	out := p.response(field("message"), strings.ToUpper(level), field)
	if t, ok := parseISO(field("timestamp"), p.opts.loc()); ok {
		out.TS = p.opts.fix(t)
	}
	return out
}
