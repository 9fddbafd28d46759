package parse

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvtrail/kvtrail/internal/jsonstr"
)

// The fast path of --log-requests-format json lines (§d):
//
//	{"timestamp": …, "event": "request.…", "rid": …, "obj": {…}, "headers": {…}, "out": {…}}
//
// parseRequestJSON decodes such a line with encoding/json three times (the
// line, obj, out) into maps and RawMessages, about 40 allocations a line.
// parseRequestJSONFast reads the same fields in one strict pass over the
// line, validating all of it as encoding/json does, and hands out views of
// the line (Parsed may share memory with Record.Raw) and an EngineEvent
// from the parser's arena.
//
// It reads a line exactly as encoding/json would, or declines it (ok false)
// and parseRequestJSON reads it: anything encoding/json rejects (its error
// text is the line's Reason), a type error (a non-string timestamp or
// event, whose error makes the line malformed), a struct field key with an
// escape or a non-ASCII byte (encoding/json matches those by Unicode case
// folding: "ſ" is "s"), a field given twice (encoding/json keeps the last,
// or for meta_info merges the two), and nesting deeper than jsonMaxDepth.
// FuzzRequestJSON holds the two paths to the same Parsed.

// jsonMaxDepth bounds the nesting the fast path follows (encoding/json
// allows 10000; SGLang's lines nest a few levels).
const jsonMaxDepth = 64

// Indexes of the fields read from each object of a request line; the
// names are matched as encoding/json matches struct fields.
var (
	reqTopFields    = [...]string{"timestamp", "event", "rid", "obj", "out"}
	reqOutFields    = [...]string{"meta_info"}
	reqMetaFields   = [...]string{"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency"}
	reqFinishFields = [...]string{"type", "message", "status_code"}
)

const (
	topTimestamp = iota
	topEvent
	topRID
	topObj
	topOut
)

const (
	metaID = iota
	metaFinish
	metaPrompt
	metaCompletion
	metaCached
	metaE2E
)

const (
	finType = iota
	finMessage
	finStatus
)

// reqJSON holds the raw value spans (valid JSON, as a RawMessage would
// hold them) of the fields parseRequestJSON reads.
type reqJSON struct {
	top [len(reqTopFields)]string
	// obj's members, last one wins as in a map.
	objRID, objHost, objPort, objRoom string
	// meta: out (or its first element) is an object whose meta_info is an
	// object; metaVals are its fields.
	meta     bool
	metaVals [len(reqMetaFields)]string
	// finish: meta_info.finish_reason is an object whose type is a string
	// or null (else encoding/json fails on it and none of it is read).
	finish     bool
	finishVals [len(reqFinishFields)]string
}

// parseRequestJSONFast is parseRequestJSON without encoding/json; ok is
// false for the lines it leaves to parseRequestJSON (see above).
func parseRequestJSONFast(a *arena, msg string, ranks Ranks, opts ParseOptions) (Parsed, bool) {
	var r reqJSON
	s := jsonScan{s: msg}
	s.ws()
	if s.peek() != '{' || !r.topLevel(&s) {
		return Parsed{}, false
	}
	s.ws()
	if s.i != len(s.s) {
		return Parsed{}, false // trailing data: encoding/json's error
	}
	ts, ok := jsonStringField(r.top[topTimestamp])
	if !ok {
		return Parsed{}, false
	}
	ev, ok := jsonStringField(r.top[topEvent])
	if !ok {
		return Parsed{}, false
	}
	var event string
	switch ev {
	case "request.received":
		event = "received"
	case "request.received.openai":
		event = "received_openai"
	case "request.finished":
		event = "finished"
	default:
		return unknown("request json event " + strconv.Quote(ev)), true
	}
	e := a.event()
	e.Ranks, e.Event = ranks, event
	e.RID = jsonText(r.top[topRID])
	if e.RID == "" {
		e.RID = jsonText(r.objRID)
	}
	e.BootstrapHost = jsonText(r.objHost)
	if n, ok := jsonUint(r.objPort); ok && n <= 0xffffffff {
		e.BootstrapPort = uint32(n)
	}
	e.BootstrapRoom, _ = jsonUint(r.objRoom)
	if r.meta {
		m := &r.metaVals
		if e.RID == "" {
			e.RID = jsonText(m[metaID])
		}
		e.PromptTokens, _ = jsonUint(m[metaPrompt])
		e.CompletionTokens, _ = jsonUint(m[metaCompletion])
		e.CachedTokens, _ = jsonUint(m[metaCached])
		if f, ok := jsonFloat(m[metaE2E]); ok {
			e.E2ELatencyMs = f * 1000
		}
		if r.finish {
			f := &r.finishVals
			e.FinishType, _ = jsonStringField(f[finType])
			e.FinishMessage = jsonText(f[finMessage])
			if n, ok := jsonUint(f[finStatus]); ok && n < 1000 {
				e.StatusCode = uint16(n)
			}
		}
	}
	out := Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e,
		RID: e.RID, BootstrapRoom: e.BootstrapRoom}
	if t, ok := parseISO(ts, opts.loc()); ok {
		out.TS = opts.fix(t) // overwritten by the line prefix time if there is one
	}
	return out, true
}

// topLevel reads the line's object (jsonRequestLog).
func (r *reqJSON) topLevel(s *jsonScan) bool {
	var seen uint
	return s.members(func(key string, plain bool) bool {
		f := structField(key, plain, reqTopFields[:], &seen)
		switch f {
		case fieldBad:
			return false
		case topObj:
			start := s.i
			if s.peek() == '{' {
				if !r.obj(s) {
					return false
				}
			} else if !s.value(1) {
				return false
			}
			r.top[f] = s.s[start:s.i]
			return true
		case topOut:
			start := s.i
			if !r.out(s) {
				return false
			}
			r.top[f] = s.s[start:s.i]
			return true
		}
		start := s.i
		if !s.value(1) {
			return false
		}
		if f >= 0 {
			r.top[f] = s.s[start:s.i]
		}
		return true
	})
}

// obj reads the request object, decoded by parseRequestJSON into a
// map[string]json.RawMessage: keys are matched exactly after unescaping,
// and the last of a repeated key wins. An obj that is not an object is not
// read at all, which comes to the same as an empty one.
func (r *reqJSON) obj(s *jsonScan) bool {
	return s.members(func(key string, plain bool) bool {
		if !plain {
			key, _ = jsonstr.Unquote(key, false) // strSpan checked the escapes
		}
		start := s.i
		if !s.value(2) {
			return false
		}
		v := s.s[start:s.i]
		switch key {
		case "rid":
			r.objRID = v
		case "bootstrap_host":
			r.objHost = v
		case "bootstrap_port":
			r.objPort = v
		case "bootstrap_room":
			r.objRoom = v
		}
		return true
	})
}

// out reads the out value as metaInfoJSON does: an object, or a list whose
// first element is read.
func (r *reqJSON) out(s *jsonScan) bool {
	if s.peek() != '[' {
		return r.outObject(s, 1)
	}
	first := true
	return s.elements(1, func() bool {
		if first {
			first = false
			return r.outObject(s, 2)
		}
		return s.value(2)
	})
}

// outObject reads one out object (outObj in metaInfoJSON) at nesting
// depth-1; a value that is not an object is skipped (encoding/json fails
// on it or, for null, finds no meta_info).
func (r *reqJSON) outObject(s *jsonScan, depth int) bool {
	if s.peek() != '{' {
		return s.value(depth)
	}
	var seen uint
	return s.members(func(key string, plain bool) bool {
		switch structField(key, plain, reqOutFields[:], &seen) {
		case fieldBad:
			return false
		case 0:
			if s.peek() == '{' {
				r.meta = true
				return r.metaInfo(s, depth+1)
			}
			// null leaves MetaInfo nil; any other value is a type error:
			// either way nothing is read.
		}
		return s.value(depth + 1)
	})
}

// metaInfo reads out.meta_info (jsonMetaInfo).
func (r *reqJSON) metaInfo(s *jsonScan, depth int) bool {
	var seen uint
	return s.members(func(key string, plain bool) bool {
		f := structField(key, plain, reqMetaFields[:], &seen)
		if f == fieldBad {
			return false
		}
		start := s.i
		if f == metaFinish && s.peek() == '{' {
			if !r.finishReason(s, depth+1) {
				return false
			}
		} else if !s.value(depth + 1) {
			return false
		}
		if f >= 0 {
			r.metaVals[f] = s.s[start:s.i]
		}
		return true
	})
}

// finishReason reads meta_info.finish_reason when it is an object
// (jsonFinishReason).
func (r *reqJSON) finishReason(s *jsonScan, depth int) bool {
	var seen uint
	r.finish = true
	return s.members(func(key string, plain bool) bool {
		f := structField(key, plain, reqFinishFields[:], &seen)
		if f == fieldBad {
			return false
		}
		start := s.i
		if !s.value(depth + 1) {
			return false
		}
		v := s.s[start:s.i]
		if f == finType && v[0] != '"' && v != "null" {
			r.finish = false // encoding/json's type error: none of it is read
		}
		if f >= 0 {
			r.finishVals[f] = v
		}
		return true
	})
}

// fieldBad is structField's answer for a key the fast path leaves to
// encoding/json.
const fieldBad = -2

// structField returns the index of the field of names that key selects, as
// encoding/json matches a key to a struct field (exactly, else ASCII case
// folded), -1 for no field, or fieldBad for a key it cannot match exactly
// (escaped or non-ASCII: Unicode folding) or a field given twice.
func structField(key string, plain bool, names []string, seen *uint) int {
	if !plain {
		return fieldBad
	}
	for i, n := range names {
		if key == n || strings.EqualFold(key, n) {
			if *seen&(1<<i) != 0 {
				return fieldBad
			}
			*seen |= 1 << i
			return i
		}
	}
	return -1
}

// jsonStringField is the value of a json string field of a struct: a
// string decoded, "" for null or absent; ok is false for any other value
// (encoding/json's type error).
func jsonStringField(raw string) (string, bool) {
	switch {
	case raw == "" || raw == "null":
		return "", true
	case raw[0] == '"':
		s, _ := jsonstr.Unquote(raw[1:len(raw)-1], false) // a valid span
		return s, true
	}
	return "", false
}

// jsonText is rawString for a value span of valid JSON: a string decoded,
// the first element of a list, "" for null, the text of anything else.
func jsonText(raw string) string {
	if raw == "" || raw == "null" {
		return ""
	}
	switch raw[0] {
	case '"':
		s, _ := jsonstr.Unquote(raw[1:len(raw)-1], false) // a valid span
		return s
	case '[':
		s := jsonScan{s: raw, i: 1}
		s.ws()
		if s.peek() == ']' {
			return ""
		}
		start := s.i
		s.value(0)
		return jsonText(raw[start:s.i])
	}
	return raw
}

// jsonUint and jsonFloat are rawUint and rawFloat for a value span.
func jsonUint(raw string) (uint64, bool) { return uintText(jsonText(raw)) }

func jsonFloat(raw string) (float64, bool) { return floatText(jsonText(raw)) }

// uintText is rawUint after the value's text is taken: an unsigned
// integer, else a float in range, truncated. (strconv.ParseUint of
// anything but digits fails; it is not asked, because its error
// allocates.)
func uintText(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	if digitsOnly(s) {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n, true
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < 1<<64 {
		return uint64(f), true
	}
	return 0, false
}

func floatText(s string) (float64, bool) {
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// The validating half of jsonScan (gateway.go): the full JSON grammar as
// encoding/json's checkValid accepts it.

// members reads the object at s.i, calling member for each key (its raw
// contents, plain when they need no decoding: no escape, only ASCII) with
// s at the start of the value, which member must read.
func (s *jsonScan) members(member func(key string, plain bool) bool) bool {
	if !s.byte('{') {
		return false
	}
	s.ws()
	if s.byte('}') {
		return true
	}
	for {
		s.ws()
		key, plain, ok := s.strSpan()
		if !ok {
			return false
		}
		s.ws()
		if !s.byte(':') {
			return false
		}
		s.ws()
		if !member(key, plain) {
			return false
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

// elements reads the array at s.i (at nesting depth-1), calling elem with s
// at the start of each element, which elem must read.
func (s *jsonScan) elements(depth int, elem func() bool) bool {
	if depth >= jsonMaxDepth || !s.byte('[') {
		return false
	}
	s.ws()
	if s.byte(']') {
		return true
	}
	for {
		s.ws()
		if !elem() {
			return false
		}
		s.ws()
		switch s.next() {
		case ',':
		case ']':
			return true
		default:
			return false
		}
	}
}

// value reads any JSON value at nesting depth (0 for a top-level value).
func (s *jsonScan) value(depth int) bool {
	switch c := s.peek(); {
	case c == '"':
		_, _, ok := s.strSpan()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok := s.number()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '[':
		return s.elements(depth, func() bool { return s.value(depth + 1) })
	case c == '{':
		if depth >= jsonMaxDepth {
			return false
		}
		return s.members(func(string, bool) bool { return s.value(depth + 1) })
	}
	return false
}

// strSpan reads a string literal, validating it as encoding/json does
// (escapes of \"\\/bfnrt and \uXXXX only, no control characters; any other
// byte, invalid UTF-8 included, is accepted), and returns its raw contents
// and whether they are plain: no escape and only ASCII, so the contents
// are the decoded string.
func (s *jsonScan) strSpan() (raw string, plain, ok bool) {
	if !s.byte('"') {
		return "", false, false
	}
	start := s.i
	plain = true
	for s.i < len(s.s) {
		c := s.s[s.i]
		if !jsonStrSpecial[c] {
			s.i++
			continue
		}
		switch {
		case c == '"':
			raw = s.s[start:s.i]
			s.i++
			return raw, plain, true
		case c == '\\':
			plain = false
			s.i++
			if s.i >= len(s.s) {
				return "", false, false
			}
			switch s.s[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if _, ok := jsonstr.Hex4(s.s[s.i+1:]); !ok {
					return "", false, false
				}
				s.i += 5
			default:
				return "", false, false
			}
		case c < 0x20:
			return "", false, false
		default: // a byte of a multi-byte (or invalid) UTF-8 sequence
			plain = false
			s.i++
		}
	}
	return "", false, false
}

// jsonStrSpecial marks the bytes strSpan looks at: the quote, the
// backslash, control characters and non-ASCII bytes.
var jsonStrSpecial = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()
