package main

import (
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/bench"
)

// A page size the benches cannot simulate with is a usage error, before
// any connection (the address is a closed port).
func TestBenchRefusesABadPageSize(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"incident, negative", []string{"incident", "--page-size", "-1"}, "--page-size must be 1 to 1024"},
		{"incident, too large", []string{"incident", "--page-size", "4096"}, "--page-size must be 1 to 1024"},
		{"incident, nothing simulated", []string{"incident", "--page-size", "1", "--database", "kvt", "--dir", "x"}, "nothing is simulated"},
		{"incident, simulated where", []string{"incident", "--simulated"}, "--simulated needs --dir"},
		{"incident, simulated at a scale", []string{"incident", "--simulated", "--dir", "x", "--scale", "2"}, "with --simulated nothing is simulated"},
		{"incident, simulated and ingested", []string{"incident", "--simulated", "--dir", "x", "--database", "kvt"}, "give one"},
		{"analyze, negative", []string{"analyze", "--page-size", "-1"}, "--page-size must be 1 to 1024"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, errOut, code := run(t, dir, []string{"KVTRAIL_CLICKHOUSE_ADDR=127.0.0.1:1"},
				append([]string{"bench"}, tt.args...)...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, want 2 (usage) with %q:\n%s", code, tt.want, errOut)
			}
		})
	}
}

// The time from the first line to the list counts from the ingest on,
// whether the run simulated first or took a kept simulation, and is
// absent when nothing was ingested.
func TestLinePhases(t *testing.T) {
	ph := func(names ...string) []bench.Phase {
		var out []bench.Phase
		for _, n := range names {
			out = append(out, bench.Phase{Name: n})
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		phases []bench.Phase
		want   string
	}{
		{"simulated here", ph("simulate", "ingest", "analyze", "notification list"), "ingest, analyze, list"},
		{"simulated before", ph("ingest", "link", "analyze", "notification list"), "ingest, link, analyze, list"},
		{"ingested before", ph("analyze", "notification list"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := phaseNames(linePhases(tt.phases)); got != tt.want {
				t.Errorf("phases from the first line %q, want %q", got, tt.want)
			}
		})
	}
}
