package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// TestIngestAnalyzeEqualsIngestThenAnalyze: `kvtrail ingest --analyze`
// links the ingested span by analyzing it, and gives the notification list
// that `kvtrail ingest` then `kvtrail analyze` gives; the span is left
// linked, and a later `kvtrail analyze` takes the rows it saved instead of
// saving them again.
func TestIngestAnalyzeEqualsIngestThenAnalyze(t *testing.T) {
	ctx := context.Background()
	sim := t.TempDir()
	truth, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.05, Days: 2, OutDir: sim})
	if err != nil {
		t.Fatal(err)
	}
	if truth.AffectedTenants == 0 {
		t.Fatal("the simulated incident leaked nothing: the lists would compare empty")
	}
	manifest := filepath.Join(sim, "sources.yaml")
	dir := t.TempDir()
	envOf := func(s *chstore.Store) []string {
		return []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
	}
	// affected is the notification list as "role tenant" lines, sorted.
	affected := func(env []string) []string {
		t.Helper()
		out, errOut, code := run(t, dir, env, "affected", "--format", "json")
		if code != 0 {
			t.Fatalf("affected: exit %d\n%s", code, errOut)
		}
		var rows []string
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var r struct {
				Tenant string `json:"tenant"`
				Role   string `json:"role"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
			}
			rows = append(rows, r.Role+" "+r.Tenant)
		}
		slices.Sort(rows)
		return rows
	}

	one := testdb.New(t)
	out, errOut, code := run(t, dir, envOf(one), "ingest", "--manifest", manifest, "--analyze", "--json")
	if code != 0 {
		t.Fatalf("ingest --analyze: exit %d\n%s", code, errOut)
	}
	var sum struct {
		Facts *struct {
			Requests int `json:"requests"`
		} `json:"request_facts"`
		Analysis *struct {
			Runs []struct {
				Analyzer string `json:"analyzer"`
				Status   string `json:"status"`
			} `json:"runs"`
			Affected *struct {
				ID       string `json:"id"`
				Received int    `json:"received_foreign_data"`
			} `json:"affected_list"`
		} `json:"analysis"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("summary %v: %s", err, out)
	}
	if sum.Facts == nil || sum.Facts.Requests == 0 || sum.Analysis == nil || len(sum.Analysis.Runs) == 0 ||
		sum.Analysis.Affected == nil || sum.Analysis.Affected.Received == 0 {
		t.Fatalf("ingest --analyze printed no link, runs or list: %s", out)
	}
	if _, pending, err := ingest.PendingCorrelation(ctx, one); err != nil || pending {
		t.Fatalf("after ingest --analyze the span is pending (%v, %v), want it recorded as linked", pending, err)
	}
	listOne := affected(envOf(one))

	two := testdb.New(t)
	if _, errOut, code := run(t, dir, envOf(two), "ingest", "--manifest", manifest); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run(t, dir, envOf(two), "analyze"); code != 0 {
		t.Fatalf("analyze: exit %d\n%s", code, errOut)
	}
	if listTwo := affected(envOf(two)); !slices.Equal(listOne, listTwo) {
		t.Errorf("ingest --analyze listed\n%v\ningest then analyze\n%v", listOne, listTwo)
	}

	// The span analysis recorded its rows as a link: the next analysis of
	// the data takes them.
	out, errOut, code = run(t, dir, envOf(one), "analyze")
	if code != 0 {
		t.Fatalf("analyze after ingest --analyze: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "request_facts: took the rows of") {
		t.Errorf("the analysis after ingest --analyze saved its rows again:\n%s", out)
	}
	if got := affected(envOf(one)); !slices.Equal(got, listOne) {
		t.Errorf("the second analysis listed\n%v\nthe first\n%v", got, listOne)
	}

	if _, errOut, code := run(t, dir, envOf(one), "ingest", "--manifest", manifest, "--analyze", "--correlate=false"); code != 2 {
		t.Errorf("--analyze with --correlate=false: exit %d, want 2 (usage)\n%s", code, errOut)
	}
}
