package main

import (
	"strings"
	"testing"
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
