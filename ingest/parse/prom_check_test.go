package parse

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// promCheckCases are lines at the edges of the sample grammar, next to
// every real line of the fixtures and the corpus.
var promCheckCases = []string{
	`m 1`, `m{} 1`, `m{a="b"} 1 2`, `m{a="b"} 1 2 3`, `m{a="b"}`, `m{a="b"} `, `m{a="b"} x`,
	`m{a="b\"c"} 1`, `m{a="b\\"} 1`, `m{a="b\`, `m{a="b`, `m{a=b} 1`, `m{=“b”} 1`, `m{a "b"} 1`,
	`{"m"} 1`, `{""} 1`, `{"m", a="b"} 1`, `{a="b", "m"} 1`, `{"m" a="b"} 1`, `{"m\"x"} 1`, `{"m"`,
	`m{a="b",} 1`, `m{,a="b"} 1`, `m{a = "b"} 1`, `m NaN`, `m +Inf`, `m -Inf`, `m Inf`, `m inf`, `m nan`,
	`m 0x1p-2`, `m 1_000`, `m 1e3 1e3`, `m 1 1.5`, `m 1 1e12`, `m 1 NaN`, `m 1 # {a="b"} 1`, `m 1 #x`,
	"m\t1", "m \t 1 \t 2", "m 1\v2", "m 1\u00a02", "m 1\u00852", "m\u00a01", "m{a=\"\u00e9\"} 1",
	`m:sub 1`, `m.x 1`, `:m 1`, `_m 1`, `m{a="b"}1`, `m{a="b"} 1 2 # c`, `m{a="b"} # 1`,
}

func TestPromCheckMatchesParse(t *testing.T) {
	lines := append([]string(nil), promCheckCases...)
	for _, name := range diffInputs(t) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(data), "\n")...)
	}
	n := 0
	for _, l := range lines {
		// Every prefix of the line too: a cut line is the common damage.
		for end := len(l); end >= 0 && end >= len(l)-200; end-- {
			s := l[:end]
			_, err := parsePromSample(s)
			if got := promCheck(s); got != (err == nil) {
				t.Errorf("promCheck(%q) = %v, parsePromSample error %v", s, got, err)
			}
			n++
		}
	}
	t.Logf("%d lines compared", n)
}

func FuzzPromCheck(f *testing.F) {
	addFixtureSeeds(f, "prometheus_real.om", "prometheus_drift.prom")
	for _, c := range promCheckCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, err := parsePromSample(line)
		if got := promCheck(line); got != (err == nil) {
			t.Fatalf("promCheck(%q) = %v, parsePromSample error %v", line, got, err)
		}
		var f3 [3]string
		n := fieldsN(line, f3[:])
		want := strings.Fields(line)
		if n != min(len(want), 3) {
			t.Fatalf("fieldsN(%q) = %d, strings.Fields has %d", line, n, len(want))
		}
		for i := 0; i < n; i++ {
			if f3[i] != want[i] {
				t.Fatalf("fieldsN(%q)[%d] = %q, want %q", line, i, f3[i], want[i])
			}
		}
	})
}

// TestPromFastPathSame: the classifier's fast path for repeated series
// (repeatedSample) reads every line as the full classification does. The
// lines are fixture samples and damaged copies of them (values cut, text
// after the value, odd white space), each seen several times so that the
// series cache is hit.
func TestPromFastPathSame(t *testing.T) {
	var base []string
	for _, name := range []string{"prometheus_real.om", "prometheus_drift.prom"} {
		base = append(base, fixtureLines(t, name)...)
	}
	base = append(base, promCheckCases...)
	var lines []string
	for _, l := range base {
		lines = append(lines, l, " "+l, l+" ", l+"\t", l+"\r", l+"\u00a0", l+" x", l+" 1 2", l+"}", l+" # c")
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			lines = append(lines, l[:i], l[:i]+" NaN", l[:i]+" 1e", l[:i]+"  7 1700000000000", l[:i]+" 7\n"+l)
		}
	}
	run := func(fast bool) []string {
		promFastPath = fast
		defer func() { promFastPath = true }()
		c, err := NewClassifier(FormatPrometheus, ParseOptions{DefaultTime: utc("2026-09-01T00:00:00Z")})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for range 3 {
			for _, l := range lines {
				var b strings.Builder
				dumpValue(&b, reflect.ValueOf(c.Parse(Record{Raw: []byte(l), Lines: 1 + strings.Count(l, "\n")})))
				out = append(out, b.String())
			}
		}
		return out
	}
	slow, fast := run(false), run(true)
	hits := 0
	for i := range slow {
		if slow[i] != fast[i] {
			t.Errorf("%q:\n fast %s\n full %s", lines[i%len(lines)], fast[i], slow[i])
		}
		if strings.Contains(slow[i], `Kind:"metric"`) {
			hits++
		}
	}
	if hits < len(lines) {
		t.Fatalf("only %d samples parsed: the fast path was hardly exercised", hits)
	}
}
