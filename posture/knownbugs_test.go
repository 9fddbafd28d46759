package posture

import (
	"strings"
	"testing"
)

func TestKnownBugsTableIsCited(t *testing.T) {
	bugs, err := KnownBugs()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]Bug{}
	for _, b := range bugs {
		ids[b.ID] = b
		for _, s := range b.Sources {
			if !strings.HasPrefix(s.URL, "https://github.com/sgl-project/sglang/") || s.Note == "" {
				t.Errorf("%s: source %q must be an upstream issue or PR with a note", b.ID, s.URL)
			}
		}
	}
	b, ok := ids["sglang-30233"]
	if !ok || b.FixedIn != "0.5.20" || strings.Join(b.FollowUps, ",") != "0.5.21,0.5.22" {
		t.Errorf("sglang-30233 = %+v, want fixed in 0.5.20 with follow-ups 0.5.21, 0.5.22", b)
	}
}

func TestKnownBugsRejectsBadEntries(t *testing.T) {
	for name, doc := range map[string]string{
		"no source":     `{"bugs":[{"id":"x","roles":["decode"],"sources":[]}]}`,
		"duplicate id":  `{"bugs":[{"id":"x","roles":["decode"],"sources":[{"url":"u"}]},{"id":"x","roles":["decode"],"sources":[{"url":"u"}]}]}`,
		"bad condition": `{"bugs":[{"id":"x","roles":["decode"],"requires":["moon"],"sources":[{"url":"u"}]}]}`,
		"bad version":   `{"bugs":[{"id":"x","roles":["decode"],"fixed_in":"soon","sources":[{"url":"u"}]}]}`,
		"not json":      `{`,
	} {
		if _, err := parseBugs([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"0.5.11", "0.5.20", -1}, {"0.5.20", "0.5.20", 0}, {"v0.5.22", "0.5.20", 1},
		{"0.5.2rc1", "0.5.2", -1}, {"0.5.4.post1", "0.5.4", 1}, {"0.5.13.post1-cu130", "0.5.13", 1},
		{"0.4.10", "0.5.2", -1},
	} {
		a, ok1 := ParseVersion(c.a)
		b, ok2 := ParseVersion(c.b)
		if !ok1 || !ok2 {
			t.Fatalf("parse %q %q", c.a, c.b)
		}
		if got := a.Compare(b); got != c.want {
			t.Errorf("%s vs %s = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	for line, want := range map[string]string{
		"sglang: 0.5.11":                         "0.5.11",
		"[2026-07-01 09:00:00] sglang==0.5.22":   "0.5.22",
		"SGLang version: 0.5.13.post1":           "0.5.13.post1",
		"Traceback: /usr/lib/sglang/srt/x.py:12": "",
		"pysglang: 1.2.3":                        "",
	} {
		got, _ := versionFromLine(line)
		if got != want {
			t.Errorf("versionFromLine(%q) = %q, want %q", line, got, want)
		}
	}
}
