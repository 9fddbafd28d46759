package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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
	manifest := leakingIncident(t)
	dir := t.TempDir()
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
	out, errOut, code := run(t, dir, dbEnv(t, one), "ingest", "--manifest", manifest, "--analyze", "--json")
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
	listOne := affected(dbEnv(t, one))

	two := testdb.New(t)
	if _, errOut, code := run(t, dir, dbEnv(t, two), "ingest", "--manifest", manifest); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run(t, dir, dbEnv(t, two), "analyze"); code != 0 {
		t.Fatalf("analyze: exit %d\n%s", code, errOut)
	}
	if listTwo := affected(dbEnv(t, two)); !slices.Equal(listOne, listTwo) {
		t.Errorf("ingest --analyze listed\n%v\ningest then analyze\n%v", listOne, listTwo)
	}

	// The span analysis recorded its rows as a link: the next analysis of
	// the data takes them.
	out, errOut, code = run(t, dir, dbEnv(t, one), "analyze")
	if code != 0 {
		t.Fatalf("analyze after ingest --analyze: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "request_facts: took the rows of") {
		t.Errorf("the analysis after ingest --analyze saved its rows again:\n%s", out)
	}
	if got := affected(dbEnv(t, one)); !slices.Equal(got, listOne) {
		t.Errorf("the second analysis listed\n%v\nthe first\n%v", got, listOne)
	}

	if _, errOut, code := run(t, dir, dbEnv(t, one), "ingest", "--manifest", manifest, "--analyze", "--correlate=false"); code != 2 {
		t.Errorf("--analyze with --correlate=false: exit %d, want 2 (usage)\n%s", code, errOut)
	}
}

// Two `kvtrail ingest --worker --analyze` processes split the sources, and
// the one that claims the ingested span analyzes it, once: the findings
// and the notification list equal a single-process `ingest --analyze`'s.
// Then the same with the worker holding the span's claim kill -9ed while
// it analyzes: the other takes the span over when the lease runs out and
// analyzes it, and the killed run's partial writes change nothing.
func TestIngestWorkersAnalyzeTheSpanOnce(t *testing.T) {
	ctx := context.Background()
	manifest := leakingIncident(t)
	single := testdb.New(t)
	if _, errOut, code := run(t, t.TempDir(), dbEnv(t, single), "ingest", "--manifest", manifest, "--analyze"); code != 0 {
		t.Fatalf("single-process ingest --analyze: exit %d\n%s", code, errOut)
	}
	wantFindings, wantList := analysisSnapshot(t, single)

	for _, tt := range []struct {
		name string
		kill bool // kill -9 the worker holding the span while it analyzes
		// killAfter is a count over the database the kill waits for: what
		// the analysis must have written before its worker is killed.
		killAfter string
	}{
		{"two workers", false, ""},
		{"the analyzing worker killed at its claim", true, ""},
		{"the analyzing worker killed after saving request_facts", true, "SELECT count() FROM request_facts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := testdb.New(t)
			if _, errOut, code := run(t, t.TempDir(), dbEnv(t, s), "migrate"); code != 0 {
				t.Fatalf("migrate: exit %d\n%s", code, errOut)
			}
			type worker struct {
				cmd  *exec.Cmd
				out  *strings.Builder
				done chan error
			}
			workers := map[string]*worker{}
			for _, name := range []string{"a", "b"} {
				cmd := exec.Command(binary, append([]string{"ingest", "--manifest", manifest, "--analyze", "--worker", name}, workerFlags...)...)
				cmd.Dir, cmd.Env = t.TempDir(), append(cleanEnv(), dbEnv(t, s)...)
				w := &worker{cmd: cmd, out: &strings.Builder{}, done: make(chan error, 1)}
				cmd.Stdout, cmd.Stderr = w.out, w.out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() { w.done <- cmd.Wait() }()
				// A failed test leaves no worker running (or stopped).
				t.Cleanup(func() { _ = cmd.Process.Kill() })
				workers[name] = w
			}
			killed := ""
			if tt.kill {
				// holder is the worker holding the span's claim, not done.
				holder := func() string {
					if tt.killAfter != "" {
						var n uint64
						if err := s.QueryRow(ctx, tt.killAfter).Scan(&n); err != nil || n == 0 {
							return ""
						}
					}
					var who []string
					_ = s.QueryRow(ctx, `SELECT groupArray(worker) FROM (SELECT worker, groupArray(state) AS st FROM work_claims
 WHERE unit LIKE 'correlate/%' GROUP BY worker, unit) WHERE has(st, 'claimed') AND NOT has(st, 'done') AND NOT has(st, 'released')`).Scan(&who)
					if len(who) == 1 {
						return who[0]
					}
					return ""
				}
				for deadline := time.Now().Add(3 * time.Minute); killed == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					name := holder()
					if name == "" {
						continue
					}
					// Frozen, then asked again: it must still be analyzing.
					_ = syscall.Kill(workers[name].cmd.Process.Pid, syscall.SIGSTOP)
					if holder() != name {
						_ = syscall.Kill(workers[name].cmd.Process.Pid, syscall.SIGCONT)
						continue
					}
					_ = syscall.Kill(workers[name].cmd.Process.Pid, syscall.SIGKILL)
					<-workers[name].done
					killed = name
				}
				if killed == "" {
					t.Fatal("no worker was seen holding the span's analysis")
				}
			}
			analyzed := 0
			defer func() {
				// What the killed run had written (its request_facts version
				// and runs) beside the surviving one's.
				var versions, runs uint64
				_ = s.QueryRow(ctx, "SELECT uniqExact(version) FROM request_facts").Scan(&versions)
				_ = s.QueryRow(ctx, "SELECT uniqExact(run_id) FROM analyzer_runs").Scan(&runs)
				t.Logf("killed %q; request_facts versions %d, analyzer runs %d", killed, versions, runs)
			}()
			for name, w := range workers {
				if name == killed {
					continue
				}
				if err := <-w.done; err != nil {
					t.Fatalf("worker %s: %v\n%s", name, err, w.out)
				}
				for _, l := range strings.Split(w.out.String(), "\n") {
					if strings.Contains(l, "request_facts") {
						t.Logf("worker %s: %s", name, l)
					}
				}
				if strings.Contains(w.out.String(), "affected list") {
					analyzed++
				}
			}
			var done []string
			if err := s.QueryRow(ctx, "SELECT groupArray(worker) FROM work_claims WHERE state = 'done' AND unit LIKE 'correlate/%'").Scan(&done); err != nil {
				t.Fatal(err)
			}
			if len(done) != 1 || done[0] == killed {
				t.Errorf("the span's analysis done by %v (killed: %q), want once, by a live worker", done, killed)
			}
			if analyzed != 1 {
				t.Errorf("%d surviving workers printed an analysis, want 1", analyzed)
			}
			if _, pending, err := ingest.PendingCorrelation(ctx, s); err != nil || pending {
				t.Errorf("after the workers the span is pending (%v, %v), want it linked", pending, err)
			}
			gotFindings, gotList := analysisSnapshot(t, s)
			if !slices.Equal(gotFindings, wantFindings) {
				t.Errorf("findings\n%v\nwant (single process)\n%v", gotFindings, wantFindings)
			}
			if !slices.Equal(gotList, wantList) {
				t.Errorf("notification list\n%v\nwant (single process)\n%v", gotList, wantList)
			}
		})
	}
}

// leakingIncident simulates two days of incident-2026 that leak, and
// returns its sources manifest.
func leakingIncident(t *testing.T) string {
	t.Helper()
	sim := t.TempDir()
	truth, err := simulate.Run(context.Background(), simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.05, Days: 2, OutDir: sim})
	if err != nil {
		t.Fatal(err)
	}
	if truth.AffectedTenants == 0 {
		t.Fatal("the simulated incident leaked nothing: the lists would compare empty")
	}
	return filepath.Join(sim, "sources.yaml")
}

// dbEnv points the binary at s.
func dbEnv(t *testing.T, s *chstore.Store) []string {
	return []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
}
