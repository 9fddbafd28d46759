package main

import (
	"strings"
	"testing"
)

// A page size bench incident cannot simulate with is a usage error, before
// any connection (the address is a closed port).
func TestBenchIncidentRefusesABadPageSize(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"negative", []string{"--page-size", "-1"}, "--page-size must be 1 to 1024"},
		{"too large", []string{"--page-size", "4096"}, "--page-size must be 1 to 1024"},
		{"nothing simulated", []string{"--page-size", "1", "--database", "kvt", "--dir", "x"}, "nothing is simulated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, errOut, code := run(t, dir, []string{"KVTRAIL_CLICKHOUSE_ADDR=127.0.0.1:1"},
				append([]string{"bench", "incident"}, tt.args...)...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, want 2 (usage) with %q:\n%s", code, tt.want, errOut)
			}
		})
	}
}
