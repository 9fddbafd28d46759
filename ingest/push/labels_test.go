package push

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/prometheus/common/model"
)

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string // nil means an error is expected
	}{
		{"empty", `{}`, map[string]string{}},
		{"simple", `{job="x", node="y"}`, map[string]string{"job": "x", "node": "y"}},
		{"no spaces trailing comma", `{job="x",node="y",}`, map[string]string{"job": "x", "node": "y"}},
		{"escaped quote and backslash", `{a="say \"hi\" \\o/"}`, map[string]string{"a": `say "hi" \o/`}},
		{"hex escape", `{a="\xff\n"}`, map[string]string{"a": "\xff\n"}},
		{"unicode", `{a="é😀"}`, map[string]string{"a": "é😀"}},
		{"raw string", "{a=`x\\\"y`}", map[string]string{"a": `x\"y`}},
		{"quoted name", `{"service.name"="api"}`, map[string]string{"service.name": "api"}},
		{"empty value", `{a=""}`, map[string]string{"a": ""}},
		{"surrounding space", " \t{ a = \"b\" } \n", map[string]string{"a": "b"}},
		{"missing brace", `job="x"`, nil},
		{"unterminated", `{job="x`, nil},
		{"escaped end quote", `{job="x\"}`, nil},
		{"missing value", `{job=}`, nil},
		{"single quoted", `{job='x'}`, nil},
		{"missing equals", `{job "x"}`, nil},
		{"missing comma", `{a="1" b="2"}`, nil},
		{"duplicate", `{a="1", a="2"}`, nil},
		{"trailing data", `{a="1"} x`, nil},
		{"digit first", `{1a="1"}`, nil},
		{"empty quoted name", `{""="1"}`, nil},
		{"bad escape", `{a="\q"}`, nil},
		{"unclosed", `{a="1",`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLabels(tc.in)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("parseLabels(%q) = %v, want error", tc.in, got)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("parseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestParseLabelsRoundTrip checks the parser against the formatter clients
// actually use (Prometheus LabelSet.String, as in loki-client-go).
func TestParseLabelsRoundTrip(t *testing.T) {
	for _, ls := range []model.LabelSet{
		{},
		{"job": "sglang"},
		{"job": "a\"b\\c", "node": "n\n1\t", "x": "\xff\xfe", "u": "ünï😀", "e": ""},
	} {
		got, err := parseLabels(ls.String())
		if err != nil {
			t.Fatalf("parseLabels(%q): %v", ls.String(), err)
		}
		want := map[string]string{}
		for k, v := range ls {
			want[string(k)] = string(v)
		}
		if !maps.Equal(got, want) {
			t.Errorf("round trip of %q = %q, want %q", ls.String(), got, want)
		}
	}
}

// TestUnquoteLine covers what unquoteLine adds to jsonstr.Unquote (whose
// tests compare the decoding with encoding/json): the literal's quotes and
// white space, other JSON types refused, and invalid UTF-8 kept.
func TestUnquoteLine(t *testing.T) {
	for in, want := range map[string]string{
		`""`: "", `"plain"`: "plain", " \"a\\tb\"\n": "a\tb", `"\ud83d\ude00\ud800"`: "😀\uFFFD",
		"\"a\xff\\n\xc3\"": "a\xff\n\xc3", // encoding/json would make both bytes U+FFFD
	} {
		got, ok := unquoteLine(json.RawMessage(in))
		if !ok || got != want {
			t.Errorf("unquoteLine(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{`1`, `"`, `"\`, `"\u12"`, `"\x"`, `null`, `["a"]`} {
		if _, ok := unquoteLine(json.RawMessage(bad)); ok {
			t.Errorf("unquoteLine(%s) accepted", bad)
		}
	}
}
