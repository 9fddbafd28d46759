package analyze

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// TestPostureRegression: prefill-0 reboots from SGLang 0.5.22 with a pool
// above the context length to 0.5.11 with the #30233 pool; the analyzer
// raises one MEDIUM finding on that boot, none on the others, and none
// when the window does not hold the boot.
func TestPostureRegression(t *testing.T) {
	s := testdb.New(t)
	var srcs []ingest.Source
	for node, role := range map[string]string{"prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode", "unified-0": "unified"} {
		srcs = append(srcs, ingest.Source{Path: filepath.Join("..", "posture", "testdata", node+".log"), Node: node, Role: role, Format: "sglang"})
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), srcs); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	r := &Runner{DB: s, Cfg: DefaultConfig(), Trigger: "test", Analyzers: []Analyzer{&PostureRegression{}}, SkipReconstruct: true}
	boot := time.Date(2026, 7, 6, 10, 0, 1, 0, time.UTC)
	for _, c := range []struct {
		name string
		w    Window
		want int
	}{
		{"window holds the regressed boot", Window{From: boot.Add(-time.Hour), To: boot.Add(time.Hour)}, 1},
		{"window before it", Window{From: boot.Add(-48 * time.Hour), To: boot.Add(-24 * time.Hour)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := r.Run(context.Background(), c.w, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Runs) != 1 {
				t.Fatalf("runs = %d", len(rep.Runs))
			}
			fs := rep.Runs[0].Findings
			if len(fs) != c.want {
				t.Fatalf("findings = %d, want %d: %+v", len(fs), c.want, fs)
			}
			if c.want == 0 {
				return
			}
			f := fs[0]
			if f.Severity != Medium || f.PrefillNode != "prefill-0" || !f.TS.Equal(boot) {
				t.Errorf("finding = %s %s %s", f.Severity, f.PrefillNode, f.TS)
			}
			for _, want := range []string{"0.5.22 -> 0.5.11", "below the context length", "sglang-30233"} {
				if !strings.Contains(f.Title, want) {
					t.Errorf("title %q lacks %q", f.Title, want)
				}
			}
			if len(f.Evidence) < 4 {
				t.Errorf("evidence = %v, want the boot lines of both boots", f.Evidence)
			}
		})
	}
}
