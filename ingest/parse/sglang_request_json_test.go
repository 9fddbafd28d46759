package parse

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/jsonstr"
)

// requestJSONCases are request-JSON messages at the edges of what
// parseRequestJSONFast reads; fast says whether it must read them itself
// (true) or leave them to encoding/json (false). Either way the result
// must be parseRequestJSON's.
var requestJSONCases = []struct {
	msg  string
	fast bool
}{
	{`{"timestamp": "2026-07-06T10:00:02.1", "event": "request.received", "rid": "a", "obj": {"rid": "a", "bootstrap_room": 11}}`, true},
	// escapes and unicode in values, keys of obj, nested unknown fields
	{`{"event": "request.received", "rid": "a\"b\\c\/d\n\u00e9\ud83d\ude00\ud800x\udc00", "obj": {"bootstrap_host": "h\u00f6st", "r\u0069d": "z"}}`, true},
	{`{"event":"request.received","obj":{"rid":"é€😀","text":"\u0000\t","sampling_params":{"stop":[",","}"],"n":[[[]]],"x":{}},"bootstrap_room":"12"}}`, true},
	{"{\"event\": \"request.received\", \"rid\": \"bad\xff\xfe utf8\", \"obj\": {\"k\xff\": 1, \"rid\": \"x\"}}", true},
	{`{"event": "request.finished", "rid": null, "obj": null, "out": {"text": "x", "meta_info": {"id": "m1", "finish_reason": {"type": "abort", "message": "Failed to send kv chunk of 5 to h:1 \"q\"", "status_code": 500, "err_type": null}, "prompt_tokens": 3.0, "completion_tokens": "7", "cached_tokens": [4, 5], "e2e_latency": 1e-3}}}`, true},
	{`{"event": "request.finished", "out": [{"meta_info": {"id": ["a", "b"], "prompt_tokens": 1}}, {"meta_info": {"id": "c"}}]}`, true},
	{`{"event": "request.finished", "out": [], "obj": [1]}`, true},
	{`{"event": "request.finished", "out": [5, {"meta_info": {"id": "c"}}]}`, true},
	{`{"event": "request.finished", "out": {"meta_info": null}}`, true},
	{`{"event": "request.finished", "out": {"meta_info": "x", "text": 1}}`, true},
	{`{"event": "request.finished", "out": {"meta_info": {"finish_reason": {"type": 5, "message": "m", "status_code": 400}}}}`, true},
	{`{"event": "request.finished", "out": {"meta_info": {"finish_reason": {"type": null, "message": {"a": 1}, "status_code": -1}}}}`, true},
	{`{"event": "request.finished", "out": {"meta_info": {"finish_reason": "stop", "e2e_latency": "nan", "prompt_tokens": 1e30, "cached_tokens": -1}}}`, true},
	{`{"event": "request.finished", "out": "text", "obj": {"bootstrap_port": 4294967296, "bootstrap_room": 18446744073709551615}}`, true},
	{`{"EVENT": "request.received", "Rid": "r", "OBJ": {"RID": "not a map key match", "bootstrap_room": 3}, "Out": {"Meta_Info": {"ID": "i"}}}`, true},
	{` {"event": "request.received.openai", "obj": {"rid": true, "bootstrap_host": 1.5e3}} ` + "\t\r\n", true},
	{`{"event": "request.other", "rid": "x"}`, true},
	{`{"event": "request.received\u0021"}`, true},
	{`{"timestamp": "2026-07-06 10:00:02+02:00", "event": "request.received", "headers": {"x-smg-routing-key": "k"}}`, true},
	{`{}`, true},
	// left to encoding/json
	{`{"event": "request.received", "rid": "x"} tail`, false},
	{`{"event": "request.received", "rid": "x",}`, false},
	{`{"event": "request.received", "rid": 'x'}`, false},
	{`{"event": "request.received", "rid": "a\x"}`, false},
	{`{"event": "request.received", "rid": "a\u12"}`, false},
	{"{\"event\": \"request.received\", \"rid\": \"a\tb\"}", false},
	{`{"event": "request.received", "rid": 01}`, false},
	{`{"event": "request.received", "rid": -}`, false},
	{`{"event": "request.received", "rid": 1.}`, false},
	{`{"event": "request.received", "rid": tru}`, false},
	{`{"event": "request.received", "obj": {"rid": "x"}`, false},
	{`{"event": 5}`, false},
	{`{"event": "request.received", "timestamp": ["2026"]}`, false},
	{`{"event": "request.received", "rid": "a", "rid": "b"}`, false},
	{`{"event": "request.finished", "out": {"meta_info": {"id": "a"}, "meta_info": {"prompt_tokens": 5}}}`, false},
	{`{"event": "request.finished", "out": {"meta_info": {"id": "a"}, "meta_info": null}}`, false},
	{`{"event": "request.finished", "out": {"meta_info": {"finish_reason": {"type": "a", "TYPE": null}}}}`, false},
	{`{"ev\u0065nt": "request.received"}`, false},
	{`{"event": "request.received", "timeſtamp": "2026-07-06T10:00:00"}`, false},
	{"{\"event\": \"request.finished\", \"out\": {\"meta_info\": {\"prompt_to\u212aens\": 5}}}", false}, // Kelvin sign
	{`["event", "request.received"]`, false},
	{`{"event": "request.received", "obj": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, false},
	{``, false},
}

// requestJSONMessages are the request-JSON messages of the fixtures and
// the corpus (the text after the line prefix).
func requestJSONMessages(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, name := range diffInputs(tb) {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		for _, l := range fixtureLines(tb, strings.TrimPrefix(name, "testdata/")) {
			if strings.Contains(l, `"event": "request.`) || strings.Contains(l, `"event":"request.`) {
				if i := strings.IndexByte(l, '{'); i >= 0 {
					out = append(out, l[i:])
				}
			}
		}
	}
	if len(out) == 0 {
		tb.Fatal("no request-JSON line in the fixtures")
	}
	return out
}

var requestJSONRanks = Ranks{DP: 1, TP: 2}

// sameRequestJSON parses msg both ways and fails if the fast path reads it
// differently from encoding/json. It returns whether the fast path read it.
func sameRequestJSON(t *testing.T, msg string) bool {
	t.Helper()
	opts := ParseOptions{DefaultTime: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), ClockOffset: 250 * time.Millisecond}
	fast, ok := parseRequestJSONFast(nil, msg, requestJSONRanks, opts)
	if !ok {
		return false
	}
	want := parseRequestJSON(msg, requestJSONRanks, opts)
	if !reflect.DeepEqual(nanless(fast), nanless(want)) {
		t.Fatalf("%q:\nfast %+v %+v\njson %+v %+v", msg, fast, fast.Engine, want, want.Engine)
	}
	return true
}

// nanless returns p with its engine event copied and a NaN latency (as
// "nan" reads) replaced, so that reflect.DeepEqual can compare it.
func nanless(p Parsed) Parsed {
	if p.Engine != nil {
		e := *p.Engine
		if math.IsNaN(e.E2ELatencyMs) {
			e.E2ELatencyMs = -12345
		}
		p.Engine = &e
	}
	return p
}

func TestRequestJSONFastSameAsDecode(t *testing.T) {
	for _, c := range requestJSONCases {
		if got := sameRequestJSON(t, c.msg); got != c.fast {
			t.Errorf("%q: fast path read it: %v, want %v", c.msg, got, c.fast)
		}
	}
	// Every request-JSON line of the fixtures takes the fast path.
	for _, m := range requestJSONMessages(t) {
		if !sameRequestJSON(t, m) {
			t.Errorf("fast path declined a fixture line: %q", m)
		}
	}
}

// TestRequestJSONFastMutations compares the two paths on every line of the
// fixtures damaged in every position: a byte dropped, doubled, or replaced
// by one that changes the JSON (quotes, brackets, escapes, case, UTF-8).
func TestRequestJSONFastMutations(t *testing.T) {
	subst := []string{`"`, `\`, `{`, `}`, `[`, `]`, `,`, `:`, ` `, `0`, `-`, `e`, `n`, `\u00`, `\ud800`, "\xff", "é", "ſ", "\u212a"}
	n, fast := 0, 0
	for _, m := range requestJSONMessages(t) {
		for i := 0; i < len(m); i++ {
			variants := []string{m[:i] + m[i+1:], m[:i+1] + m[i:], m[:i] + strings.ToUpper(m[i:i+1]) + m[i+1:], m[:i]}
			for _, s := range subst {
				variants = append(variants, m[:i]+s+m[i+1:])
			}
			for _, v := range variants {
				n++
				if sameRequestJSON(t, v) {
					fast++
				}
			}
		}
	}
	t.Logf("%d mutations, %d read by the fast path", n, fast)
	if fast < n/10 {
		t.Errorf("the fast path read only %d of %d mutations", fast, n)
	}
}

// FuzzRequestJSON holds parseRequestJSONFast to parseRequestJSON, and the
// scanner's validation and string decoding to encoding/json's. The seeds
// (run by every go test) are the fixture lines, the edge cases above and
// testdata/fuzz/FuzzRequestJSON.
func FuzzRequestJSON(f *testing.F) {
	for _, m := range requestJSONMessages(f) {
		f.Add(m)
	}
	for _, c := range requestJSONCases {
		f.Add(c.msg)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		sameRequestJSON(t, msg)
		checkJSONScan(t, msg)
	})
}

// checkJSONScan compares the validating scanner with json.Valid, and
// jsonstr.Unquote of the spans it reads with json.Unmarshal into a string.
func checkJSONScan(t *testing.T, x string) {
	t.Helper()
	s := jsonScan{s: x}
	s.ws()
	ok := s.value(0)
	s.ws()
	ok = ok && s.i == len(x)
	valid := json.Valid([]byte(x))
	if ok && !valid {
		t.Fatalf("scanner accepts invalid JSON %q", x)
	}
	if !ok && valid && strings.Count(x, "[")+strings.Count(x, "{") < jsonMaxDepth {
		t.Fatalf("scanner rejects valid JSON %q", x)
	}
	for _, lit := range []string{`"` + x + `"`, x} {
		var want string
		if json.Unmarshal([]byte(lit), &want) != nil {
			continue
		}
		lit = strings.Trim(lit, " \t\r\n") // JSON white space around the value
		s := jsonScan{s: lit}
		raw, plain, ok := s.strSpan()
		if !ok || s.i != len(lit) {
			t.Fatalf("strSpan rejects the valid string %q", lit)
		}
		if got, ok := jsonstr.Unquote(raw, false); !ok || got != want {
			t.Fatalf("jsonstr.Unquote(%q) = %q, %v; encoding/json %q", raw, got, ok, want)
		}
		if plain && raw != want {
			t.Fatalf("%q called plain, decodes to %q", raw, want)
		}
	}
}
