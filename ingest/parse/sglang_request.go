package parse

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// parseRequestText parses --log-requests text lines (§d):
//
//	Receive: obj=GenerateReqInput(rid='…', …, bootstrap_host='…', bootstrap_port=8998, bootstrap_room=…, …)[, headers={…}]
//	Receive OpenAI: obj=…
//	Finish: obj=GenerateReqInput(…)[, headers={…}], out={'text': …, 'meta_info': {…}}
//
// The payload is a Python repr; level 2 truncates strings to 'head' ... 'tail'.
func parseRequestText(a *arena, msg string, ranks Ranks) Parsed {
	return parseRequestTextScan(a, msg, ranks, true)
}

// parseRequestTextScan is parseRequestText; oneScan false turns off the
// single scan of obj (reqObjFirst), which the tests compare with.
func parseRequestTextScan(a *arena, msg string, ranks Ranks, oneScan bool) Parsed {
	e := a.event()
	e.Ranks = ranks
	var rest string
	switch {
	case strings.HasPrefix(msg, "Receive: "):
		e.Event, rest = "received", msg[len("Receive: "):]
	case strings.HasPrefix(msg, "Receive OpenAI: "):
		e.Event, rest = "received_openai", msg[len("Receive OpenAI: "):]
	default:
		e.Event, rest = "finished", strings.TrimPrefix(msg, "Finish: ")
	}
	var sawObj bool
	pairs := func(k, v string) bool {
		switch k {
		case "obj":
			sawObj = true
			reqObjRepr(e, v)
		case "out":
			out := pyFirst(v)
			body, open := pyOpen(out)
			if open != '{' {
				return true
			}
			pyDict(body, func(dk, dv string) bool {
				if pyText(dk) == "meta_info" {
					metaInfoRepr(e, dv)
					return false
				}
				return true
			})
		}
		return true
	}
	if end, ok := reqObjFirst(e, rest, oneScan); ok {
		sawObj = true
		if end < len(rest) && rest[end] == ',' {
			pyKwargs(rest[end:], pairs) // the pairs after obj, as pyKwargs(rest) goes on
		}
	} else {
		pyKwargs(rest, pairs)
	}
	out := Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e,
		RID: e.RID, BootstrapRoom: e.BootstrapRoom}
	if !sawObj {
		out.Status, out.Reason = StatusMalformed, e.Event+": no obj="
	}
	return out
}

// reqObjRepr reads the request object: a dataclass repr
// (GenerateReqInput(…)) or, for OpenAI requests, possibly a dict.
func reqObjRepr(e *EngineEvent, v string) {
	body, open := pyOpen(v)
	switch open {
	case '(':
		pyKwargs(body, func(k, val string) bool { return reqObjField(e, k, val) })
	case '{':
		pyDict(body, func(k, val string) bool { return reqObjField(e, pyText(k), val) })
	}
}

func reqObjField(e *EngineEvent, k, val string) bool {
	switch k {
	case "rid":
		if s, ok := pyString(pyFirst(val)); ok && e.RID == "" {
			e.RID = s
		}
	case "bootstrap_host":
		e.BootstrapHost, _ = pyString(pyFirst(val))
	case "bootstrap_port":
		if n, ok := pyUint(pyFirst(val)); ok && n <= 0xffffffff {
			e.BootstrapPort = uint32(n)
		}
	case "bootstrap_room":
		e.BootstrapRoom, _ = pyUint(pyFirst(val))
	}
	return true
}

// reqObjFirst reads the first pair of rest when it is obj=Name(…), in one
// scan of the value. pyKwargs(rest) scans the value once to find where it
// ends and reqObjRepr scans it again for its pairs; here the pairs are
// read first, and the scan for the value's end resumes after the closer
// they stop at. It returns that end (where pyKwargs(rest) goes on), or
// ok false, e untouched, where the two could differ: no such first pair,
// or a '>' at the top level of the body (pyScan counts it as a close from
// outside the brackets, not inside). A value cut before its closer (a
// truncated line) runs to the end of rest either way; the pairs differ at
// most by trailing white space, which the last value loses to TrimSpace
// in both and which gives no key.
func reqObjFirst(e *EngineEvent, rest string, enabled bool) (end int, ok bool) {
	if !enabled || !strings.HasPrefix(rest, "obj=") {
		return 0, false
	}
	i := len("obj=")
	for i < len(rest) && asciiSpace(rest[i]) {
		i++ // strings.TrimSpace of the value; Unicode spaces are not taken
	}
	if i >= len(rest) || rest[i] >= utf8.RuneSelf || rest[i] == '=' {
		return 0, false
	}
	body, open := pyOpen(rest[i:])
	if open != '(' {
		return 0, false
	}
	tmp := *e
	stop, clamped := pyKwargsStop(body, func(k, val string) bool { return reqObjField(&tmp, k, val) })
	if clamped || stop < 0 {
		return 0, false
	}
	*e = tmp
	if stop >= len(body) {
		return len(rest), true
	}
	closer := len(rest) - len(body) + stop
	return pyScan(rest, closer+1, ","), true
}

// metaInfoRepr reads out['meta_info'] (§d; finish_reason per §c7).
func metaInfoRepr(e *EngineEvent, v string) {
	body, open := pyOpen(v)
	if open != '{' {
		return
	}
	pyDict(body, func(k, val string) bool {
		switch pyText(k) {
		case "id":
			if s, ok := pyString(val); ok && e.RID == "" {
				e.RID = s
			}
		case "prompt_tokens":
			e.PromptTokens, _ = pyUint(val)
		case "completion_tokens":
			e.CompletionTokens, _ = pyUint(val)
		case "cached_tokens":
			e.CachedTokens, _ = pyUint(val)
		case "e2e_latency":
			if f, ok := pyFloat(val); ok {
				e.E2ELatencyMs = f * 1000
			}
		case "finish_reason":
			fb, fo := pyOpen(val)
			if fo != '{' {
				return true
			}
			pyDict(fb, func(fk, fv string) bool {
				switch pyText(fk) {
				case "type":
					e.FinishType, _ = pyString(fv)
				case "message":
					e.FinishMessage, _ = pyString(fv)
				case "status_code":
					if n, ok := pyUint(fv); ok && n < 1000 {
						e.StatusCode = uint16(n)
					}
				}
				return true
			})
		}
		return true
	})
}

// jsonRequestLog is one --log-requests-format json line (§d).
type jsonRequestLog struct {
	Timestamp string          `json:"timestamp"`
	Event     string          `json:"event"`
	RID       json.RawMessage `json:"rid"`
	Obj       json.RawMessage `json:"obj"`
	Out       json.RawMessage `json:"out"`
}

type jsonMetaInfo struct {
	ID               json.RawMessage `json:"id"`
	FinishReason     json.RawMessage `json:"finish_reason"`
	PromptTokens     json.RawMessage `json:"prompt_tokens"`
	CompletionTokens json.RawMessage `json:"completion_tokens"`
	CachedTokens     json.RawMessage `json:"cached_tokens"`
	E2ELatency       json.RawMessage `json:"e2e_latency"`
}

type jsonFinishReason struct {
	Type       string          `json:"type"`
	Message    json.RawMessage `json:"message"`
	StatusCode json.RawMessage `json:"status_code"`
}

// parseRequestJSON parses `[ts] {"timestamp": …, "event": "request.received"|
// "request.received.openai"|"request.finished", "rid": …, "obj": {…}, "out": {…}}`.
func parseRequestJSON(msg string, ranks Ranks, opts ParseOptions) Parsed {
	var l jsonRequestLog
	// encoding/json neither writes nor keeps its input: no copy of msg.
	if err := json.Unmarshal(unsafe.Slice(unsafe.StringData(msg), len(msg)), &l); err != nil {
		return malformed(KindEngine, "", "request json: "+err.Error())
	}
	e := &EngineEvent{Ranks: ranks}
	switch l.Event {
	case "request.received":
		e.Event = "received"
	case "request.received.openai":
		e.Event = "received_openai"
	case "request.finished":
		e.Event = "finished"
	default:
		return unknown("request json event " + strconv.Quote(l.Event))
	}
	e.RID = rawString(l.RID)
	var obj map[string]json.RawMessage
	if json.Unmarshal(l.Obj, &obj) == nil {
		if e.RID == "" {
			e.RID = rawString(obj["rid"])
		}
		e.BootstrapHost = rawString(obj["bootstrap_host"])
		if n, ok := rawUint(obj["bootstrap_port"]); ok && n <= 0xffffffff {
			e.BootstrapPort = uint32(n)
		}
		e.BootstrapRoom, _ = rawUint(obj["bootstrap_room"])
	}
	if len(l.Out) > 0 {
		metaInfoJSON(e, l.Out)
	}
	out := Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e,
		RID: e.RID, BootstrapRoom: e.BootstrapRoom}
	if t, ok := parseISO(l.Timestamp, opts.loc()); ok {
		out.TS = opts.fix(t) // overwritten by the line prefix time if there is one
	}
	return out
}

// metaInfoJSON reads out.meta_info from a JSON out value, an object or a
// list of them (batched requests: the first).
func metaInfoJSON(e *EngineEvent, raw json.RawMessage) {
	var outObj struct {
		MetaInfo *jsonMetaInfo `json:"meta_info"`
	}
	if len(raw) > 0 && raw[0] == '[' {
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil || len(a) == 0 {
			return
		}
		raw = a[0]
	}
	if json.Unmarshal(raw, &outObj) != nil || outObj.MetaInfo == nil {
		return
	}
	m := outObj.MetaInfo
	applyMetaInfo(e, m)
}

func applyMetaInfo(e *EngineEvent, m *jsonMetaInfo) {
	if e.RID == "" {
		e.RID = rawString(m.ID)
	}
	e.PromptTokens, _ = rawUint(m.PromptTokens)
	e.CompletionTokens, _ = rawUint(m.CompletionTokens)
	e.CachedTokens, _ = rawUint(m.CachedTokens)
	if f, ok := rawFloat(m.E2ELatency); ok {
		e.E2ELatencyMs = f * 1000
	}
	var fr jsonFinishReason
	if len(m.FinishReason) > 0 && m.FinishReason[0] == '{' && json.Unmarshal(m.FinishReason, &fr) == nil {
		e.FinishType = fr.Type
		e.FinishMessage = rawString(fr.Message)
		if n, ok := rawUint(fr.StatusCode); ok && n < 1000 {
			e.StatusCode = uint16(n)
		}
	}
}

// parseUvicorn parses an access line re-emitted through the SGLang
// formatter (§0): INFO:     10.10.11.1:41698 - "POST /v1/chat/completions HTTP/1.1" 200 OK
func parseUvicorn(a *arena, msg string, ranks Ranks) (Parsed, bool) {
	rest := strings.TrimLeft(strings.TrimPrefix(msg, "INFO:"), " ")
	client, req, ok := strings.Cut(rest, ` - "`)
	if !ok {
		return Parsed{}, false
	}
	reqLine, tail, ok := strings.Cut(req, `" `)
	if !ok {
		return Parsed{}, false
	}
	e := a.event()
	*e = EngineEvent{Ranks: ranks, Event: "http_access", Client: client}
	var parts [2]string
	if fieldsN(reqLine, parts[:]) >= 2 {
		e.Method, e.Path = parts[0], parts[1]
	}
	code, _, _ := strings.Cut(tail, " ")
	n, err := strconv.ParseUint(code, 10, 16)
	if err != nil || n > 999 {
		return malformed(KindEngine, "http_access", "bad status code "+strconv.Quote(code)), true
	}
	e.StatusCode = uint16(n)
	return Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e}, true
}

// parseGenerateResponse reads a /generate response body as it lands in
// logs and bug reports: {"text": …, "meta_info": {"id": …, "finish_reason":
// {…}, …}} or a list of them (batched; the first). A finish_reason message
// that names a bootstrap room (a transfer failure, §c4) gives the room.
func parseGenerateResponse(msg string, ranks Ranks) Parsed {
	e := &EngineEvent{Ranks: ranks, Event: "response_body"}
	// The first JSON value only: pasted bodies often run into a shell prompt.
	var raw json.RawMessage
	if err := json.NewDecoder(strings.NewReader(msg)).Decode(&raw); err != nil {
		return malformed(KindEngine, e.Event, "response body: "+err.Error())
	}
	metaInfoJSON(e, raw)
	if e.RID == "" && e.FinishType == "" {
		return malformed(KindEngine, e.Event, "response body: no meta_info")
	}
	if room, ok := uintAfter(e.FinishMessage, "bootstrap_room="); ok {
		e.BootstrapRoom = room
	}
	return Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e, RID: e.RID, BootstrapRoom: e.BootstrapRoom}
}
