package chstore_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/sqlcheck"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Every rendering of every migration must parse under the modern grammar,
// and the renderings are pinned by golden files so a template change shows
// up as a reviewable diff of the SQL.
func TestRenderedMigrations(t *testing.T) {
	// The zero Version renders for 18.16 (portable); 26.7 is the modern
	// engine the chdb tier runs (internal/chdbtier).
	modern := chstore.Version{Major: 26, Minor: 7, Patch: 2}
	layouts := map[string]chstore.Layout{
		"single":         {Database: "kvtrail"},
		"cluster":        {Database: "kvtrail", Cluster: "kvtrail_cluster"},
		"single.modern":  {Database: "kvtrail", Version: modern},
		"cluster.modern": {Database: "kvtrail", Cluster: "kvtrail_cluster", Version: modern},
	}
	for name, layout := range layouts {
		t.Run(name, func(t *testing.T) {
			var all []string
			for _, m := range embedded(t) {
				stmts, err := chstore.Render(m.Source, layout)
				if err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
				for _, s := range stmts {
					if err := sqlcheck.Check(s); err != nil {
						t.Errorf("%s: %v", m.Name, err)
					}
				}
				all = append(all, "-- "+m.Name)
				all = append(all, stmts...)
			}
			got := strings.Join(all, ";\n\n") + ";\n"
			if strings.HasSuffix(name, ".modern") != strings.Contains(got, "ADD INDEX IF NOT EXISTS idx_line_id") {
				t.Errorf("%s: skip indexes must be rendered exactly for modern servers", name)
			}
			if strings.HasPrefix(name, "cluster") {
				for _, want := range []string{"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/raw_lines_local', '{replica}')",
					"ON CLUSTER kvtrail_cluster", "ENGINE = Distributed(kvtrail_cluster, kvtrail, raw_lines_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)))",
					"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/request_facts_local', '{replica}', version)"} {
					if !strings.Contains(got, want) {
						t.Errorf("cluster rendering lacks %q", want)
					}
				}
			} else if strings.Contains(got, "Replicated") || strings.Contains(got, "ON CLUSTER") || strings.Contains(got, "{{") {
				t.Error("single-node rendering contains cluster or template syntax")
			}
			golden := filepath.Join("testdata", "schema."+name+".sql")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if string(want) != got {
				t.Errorf("rendering differs from %s; review and run go test ./internal/chstore -run TestRenderedMigrations -update", golden)
			}
		})
	}
}

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"SELECT 1;\nSELECT 2;\n", []string{"SELECT 1", "SELECT 2"}},
		{"-- only a comment\n;\n", nil},
		{"CREATE TABLE t (\n  x UInt8 -- c; not an end\n) ENGINE = Log;\n", []string{"CREATE TABLE t (\n  x UInt8 -- c; not an end\n) ENGINE = Log"}},
		{"SELECT 'a;b'", []string{"SELECT 'a;b'"}},
	}
	for _, tt := range tests {
		got := chstore.SplitStatements(tt.in)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("SplitStatements(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
