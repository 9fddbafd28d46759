package parse

import (
	"os"
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
