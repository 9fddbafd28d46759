package parse

import (
	"reflect"
	"strings"
	"testing"
)

// requestTextCases are Receive/Finish messages at the edges of the single
// scan of obj (reqObjFirst); oneScan says whether it must take them.
var requestTextCases = []struct {
	msg     string
	oneScan bool
}{
	{`Receive: obj=GenerateReqInput(rid='a', bootstrap_host='h', bootstrap_port=8998, bootstrap_room=7)`, true},
	{`Finish: obj=GenerateReqInput(rid='a', text='x > y, (z]', f=<function <lambda> at 0x7f>, bootstrap_room=[7, 8]), headers={'k': 'v'}, out={'meta_info': {'id': 'b', 'prompt_tokens': 3}}`, true},
	{`Finish: obj= GenerateReqInput(rid='a') junk, out={'meta_info': {'id': 'b'}}, obj=X(rid='c', bootstrap_room=9)`, true},
	{"Finish: obj=\tX(rid='a'), out=[{'meta_info': {'finish_reason': {'type': 'abort', 'status_code': 500}}}]", true},
	{`Receive: obj=X(rid='a')`, true},
	{`Receive: obj=X(rid='a'))), out={'meta_info': {'id': 'b'}}`, true},
	// left to the two-scan path
	{`Receive: obj=X(rid='a', cmp=1 > 0, bootstrap_room=7), out={'meta_info': {'id': 'b'}}`, false},
	{`Receive: obj=X(rid='a', bootstrap_room=7`, true},
	{"Receive: obj=X(rid='a', bootstrap_room=7,\t\u00a0 ", true},
	{"Receive: obj=X(rid='a', bootstrap_room=\u00a0", true},
	{"Receive: obj=X(rid='a', bootstrap_room='7 \u2003", true},
	{`Receive: obj={'rid': 'a', 'bootstrap_room': 7}`, false},
	{`Receive: obj=` + "\u00a0" + `X(rid='a')`, false},
	{`Receive: obj==X(rid='a')`, false},
	{`Receive: rid='a', obj=X(rid='b')`, false},
	{`Receive: obj=`, false},
	{`Finish: out={'meta_info': {}}`, false},
}

// requestTextMessages are the Receive/Finish messages of the fixtures and
// the corpus (from "Receive"/"Finish: " on).
func requestTextMessages(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, name := range diffInputs(tb) {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		for _, l := range fixtureLines(tb, strings.TrimPrefix(name, "testdata/")) {
			for _, k := range []string{"Receive: obj=", "Receive OpenAI: obj=", "Finish: obj="} {
				if i := strings.Index(l, k); i >= 0 {
					out = append(out, l[i:])
					break
				}
			}
		}
	}
	if len(out) < 4 {
		tb.Fatalf("only %d Receive/Finish lines in the fixtures", len(out))
	}
	return out
}

// sameRequestText parses msg with and without the single scan of obj and
// fails if they differ; it returns whether the single scan took msg.
func sameRequestText(t *testing.T, msg string) bool {
	t.Helper()
	one := parseRequestTextScan(nil, msg, requestJSONRanks, true)
	two := parseRequestTextScan(nil, msg, requestJSONRanks, false)
	if !reflect.DeepEqual(one, two) {
		t.Fatalf("%q:\none scan  %+v %+v\ntwo scans %+v %+v", msg, one, one.Engine, two, two.Engine)
	}
	e := EngineEvent{}
	_, took := reqObjFirst(&e, strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(msg, "Receive: "), "Receive OpenAI: "), "Finish: "), true)
	return took
}

func TestRequestTextOneScanSame(t *testing.T) {
	for _, c := range requestTextCases {
		if got := sameRequestText(t, c.msg); got != c.oneScan {
			t.Errorf("%q: single scan took it: %v, want %v", c.msg, got, c.oneScan)
		}
	}
	// Every fixture line takes the single scan, but for the dict form of
	// OpenAI requests, which it leaves to pyDict.
	for _, m := range requestTextMessages(t) {
		if !sameRequestText(t, m) && !strings.HasPrefix(m, "Receive OpenAI: obj={") {
			t.Errorf("single scan declined a fixture line: %q", m)
		}
	}
}

// TestRequestTextOneScanMutations compares the two on every fixture line
// damaged in every position.
func TestRequestTextOneScanMutations(t *testing.T) {
	subst := []string{`'`, `"`, `\`, `(`, `)`, `[`, `]`, `{`, `}`, `<`, `<a`, `>`, `,`, `:`, `=`, ` `, "\u00a0", "\xff"}
	n, one := 0, 0
	for _, m := range requestTextMessages(t) {
		for i := 0; i < len(m); i++ {
			variants := []string{m[:i] + m[i+1:], m[:i+1] + m[i:], m[:i]}
			for _, s := range subst {
				variants = append(variants, m[:i]+s+m[i+1:])
			}
			for _, v := range variants {
				n++
				if sameRequestText(t, v) {
					one++
				}
			}
		}
	}
	t.Logf("%d mutations, %d taken by the single scan", n, one)
	if one < n/3 {
		t.Errorf("the single scan took only %d of %d mutations", one, n)
	}
}

// FuzzRequestText holds the single scan of obj to the two-scan reading.
func FuzzRequestText(f *testing.F) {
	for _, m := range requestTextMessages(f) {
		f.Add(m)
	}
	for _, c := range requestTextCases {
		f.Add(c.msg)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		sameRequestText(t, msg)
		sameRequestText(t, "Finish: "+msg)
		sameRequestText(t, "Finish: obj="+msg)
	})
}
