package parse

import (
	"reflect"
	"strings"
	"testing"
)

// gatewayFlatCases are lines at the edges of what gatewayFlat reads; for
// each, the flat scan and the full decode must give the same Parsed.
var gatewayFlatCases = []string{
	`{}`, `{ }`, `[]`, `null`, `"x"`, `1`, `{`, `{"ts":`, `{"ts":"2026-08-20T10:11:12Z"`,
	`{"ts":"2026-08-20T10:11:12Z"}`, `{"ts":"2026-08-20T10:11:12Z"} trailing`, `{"ts":"2026-08-20T10:11:12Z"}}`,
	`{"ts":1787221872123,"status":200}`, `{"ts":1787221872.5e0,"status":2e2}`, `{"ts":-1,"status":-0}`,
	`{"ts":01}`, `{"ts":1.}`, `{"ts":.5}`, `{"ts":1e}`, `{"ts":1e+}`, `{"ts":+1}`, `{"ts":1x}`,
	`{"ts":true}`, `{"ts":false,"status":true}`, `{"ts":null,"request_id":null}`, `{"ts":nul}`,
	`{"ts":{"a":1}}`, `{"ts":[1]}`, `{"request_id":{"a":1},"ts":1}`, `{"request_id":["a"],"ts":1}`,
	`{"extra":{"x":[1,{"y":"z"},true,false,null,-1.5e3]},"ts":1}`, `{"extra":{"x":[1,]},"ts":1}`,
	`{"extra":{"x" 1},"ts":1}`, `{"extra":{1:2},"ts":1}`, `{"extra":[}`, `{"extra":{"a":"\u0041"},"ts":1}`,
	`{"request_id":"a\"b","ts":1}`, `{"request_id":"a\u00e9","ts":1}`, `{"request_id":"é","ts":1}`,
	"{\"request_id\":\"a\tb\",\"ts\":1}", "{\"request_id\":\"a\xffb\",\"ts\":1}", "{\"request_id\":\"\xe2\x82\",\"ts\":1}",
	`{"req\u0075est_id":"x","ts":1}`, `{"request_id":"a","request_id":"b","ts":1}`, `{"request_id":"a","request_id":null,"ts":1}`,
	`{"status":"400","ts":"1787221872"}`, `{"status":99999,"ts":1}`, `{"bootstrap_room":9223372036854775807,"ts":1}`,
	`{"bootstrap_room":18446744073709551616,"ts":1}`, `{"bootstrap_room":1.5,"ts":1}`, `{"ttft_ms":"12ms","ts":1}`,
	"{\n\"ts\" :\t1 ,\r\"status\": 200 }", `{"ts":1,}`, `{,"ts":1}`, `{"ts":1 "status":2}`, `{"ts" 1}`,
	`{"a.b":1,"ts":1}`, `{"TS":1}`,
}

func TestGatewayFlatSameAsDecode(t *testing.T) {
	lines := append([]string(nil), gatewayFlatCases...)
	for _, l := range fixtureLines(t, "gateway.jsonl") {
		lines = append(lines, l)
		for end := len(l) - 1; end > 0; end -= 7 {
			lines = append(lines, l[:end]) // cut lines, the common damage
		}
	}
	for _, m := range []*GatewayMapping{nil, {Fields: FieldMapping{"request_id": "id", "tenant": "id"}, DurationUnit: "s", TimeFormat: "unix_ms"}} {
		fast := mustNew(t, FormatGateway, ParseOptions{Gateway: m}).(*gatewayParser)
		full := mustNew(t, FormatGateway, ParseOptions{Gateway: m}).(*gatewayParser)
		if !fast.flat {
			t.Fatal("a mapping of single keys must take the flat path")
		}
		full.flat = false
		flat := 0
		for _, l := range lines {
			var a, b strings.Builder
			dumpValue(&a, reflect.ValueOf(fast.Parse(Record{Raw: []byte(l), Lines: 1})))
			dumpValue(&b, reflect.ValueOf(full.Parse(Record{Raw: []byte(l), Lines: 1})))
			if a.String() != b.String() {
				t.Errorf("%q:\n flat %s\n full %s", l, a.String(), b.String())
			}
			var vals [len(gatewayFieldNames)]gwValue
			if gatewayFlat(strings.TrimSpace(l), fast.paths, &vals) {
				flat++
			}
		}
		if flat < len(gatewayFlatCases)/3 {
			t.Errorf("only %d of %d lines took the flat path", flat, len(lines))
		}
	}
}

func FuzzGatewayFlat(f *testing.F) {
	addFixtureSeeds(f, "gateway.jsonl")
	for _, c := range gatewayFlatCases {
		f.Add(c)
	}
	fast := mustNew(f, FormatGateway, ParseOptions{}).(*gatewayParser)
	full := mustNew(f, FormatGateway, ParseOptions{}).(*gatewayParser)
	full.flat = false
	f.Fuzz(func(t *testing.T, line string) {
		var a, b strings.Builder
		dumpValue(&a, reflect.ValueOf(fast.Parse(Record{Raw: []byte(line), Lines: 1})))
		dumpValue(&b, reflect.ValueOf(full.Parse(Record{Raw: []byte(line), Lines: 1})))
		if a.String() != b.String() {
			t.Fatalf("%q:\n flat %s\n full %s", line, a.String(), b.String())
		}
	})
}
