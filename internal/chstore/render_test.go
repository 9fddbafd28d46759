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
			for _, modernOnly := range []string{"ADD INDEX IF NOT EXISTS idx_line_id", "ADD INDEX IF NOT EXISTS idx_run_id",
				"ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns))", "DateTime64"} {
				if strings.HasSuffix(name, ".modern") != strings.Contains(got, modernOnly) {
					t.Errorf("%s: %q must be rendered exactly for modern servers", name, modernOnly)
				}
			}
			// ts stays a second-precision DateTime on every rendering: the
			// one SQL text compares it with whole-second bounds (0007).
			if strings.Contains(got, "ts DateTime64") || strings.Contains(got, "ts            DateTime64") {
				t.Errorf("%s: ts rendered as DateTime64", name)
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

// The modern rendering and TTL retention start at ModernSince (22.1): the
// first release with every feature they use. 18.16 and the unsupported
// 19.x-21.x get the portable rendering.
func TestVersionModern(t *testing.T) {
	for _, tt := range []struct {
		v    chstore.Version
		want bool
	}{
		{chstore.Version{}, false},
		{chstore.Version{Major: 18, Minor: 16, Patch: 1}, false},
		{chstore.Version{Major: 19, Minor: 17}, false},
		{chstore.Version{Major: 21, Minor: 12}, false},
		{chstore.Version{Major: 22, Minor: 1}, true},
		{chstore.Version{Major: 24, Minor: 8, Patch: 4}, true},
		{chstore.Version{Major: 26, Minor: 7, Patch: 2}, true},
	} {
		if got := tt.v.Modern(); got != tt.want {
			t.Errorf("%s.Modern() = %v, want %v", tt.v, got, tt.want)
		}
		stmts, err := chstore.Render("{{if modern}}SELECT 1;{{end}}", chstore.Layout{Database: "d", Version: tt.v})
		if err != nil || (len(stmts) == 1) != tt.want {
			t.Errorf("{{modern}} for %s rendered %q (%v)", tt.v, stmts, err)
		}
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
