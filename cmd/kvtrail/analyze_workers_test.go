package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// sliceEnv makes analysis read the small test incidents in many slices.
const sliceEnv = "KVTRAIL_ANALYZE_SLICE_REQUESTS=150"

// Two `kvtrail analyze --worker` processes share a job over an incident
// read in slices; worker a is kill -9ed while it holds a slice. b takes
// the slice over once the lease has run out and concludes: the current
// findings and the notification list equal a single `kvtrail analyze`.
func TestAnalysisWorkersEqualSingleProcess(t *testing.T) {
	sim := t.TempDir()
	if _, err := simulate.Run(context.Background(), simulate.Config{Scenario: "incident-2026", Seed: 5, Scale: 0.02, Days: 1, OutDir: sim}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(sim, "sources.yaml")
	envFor := func(s *chstore.Store) []string {
		return []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database(), sliceEnv}
	}
	single, shared := testdb.New(t), testdb.New(t)
	for _, s := range []*chstore.Store{single, shared} {
		if _, errOut, code := run(t, t.TempDir(), envFor(s), "ingest", "--manifest", manifest); code != 0 {
			t.Fatalf("ingest: exit %d\n%s", code, errOut)
		}
	}
	if out, errOut, code := run(t, t.TempDir(), envFor(single), "analyze"); code != 0 {
		t.Fatalf("single analyze: exit %d\n%s\n%s", code, out, errOut)
	}
	wantF, wantA := analysisSnapshot(t, single)
	runAnalysisWorkers(t, t.TempDir(), envFor(shared), envFor(shared), shared)
	gotF, gotA := analysisSnapshot(t, shared)
	compare(t, "findings (id severity confidence foreign)", wantF, gotF)
	compare(t, "notification list (tenant role tier requests)", wantA, gotA)
	t.Logf("%d findings, %d list rows", len(gotF), len(gotA))
}

// runAnalysisWorkers runs a job with workers a (env a) and b (env b),
// kill -9s a once it holds a slice, and waits for b to conclude.
func runAnalysisWorkers(t *testing.T, dir string, envA, envB []string, probe *chstore.Store) {
	t.Helper()
	out, errOut, code := run(t, dir, envA, "analyze", "--new-job")
	if code != 0 {
		t.Fatalf("analyze --new-job: exit %d\n%s", code, errOut)
	}
	job := strings.TrimSpace(out)
	start := func(name string, env []string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(binary, append([]string{"analyze", "--worker", name, "--job", job}, workerFlags...)...)
		cmd.Dir, cmd.Env = dir, append(cleanEnv(), env...)
		var buf strings.Builder
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &buf
	}
	a, aOut := start("a", envA)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n uint64
		_ = probe.QueryRow(context.Background(), "SELECT count() FROM work_claims WHERE job = ? AND worker = 'a' AND state = 'claimed'", job).Scan(&n)
		if n >= 2 {
			break // it finished one slice at least and holds another
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker a claimed nothing in 2 minutes:\n%s", aOut)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, bOut := start("b", envB)
	_ = syscall.Kill(a.Process.Pid, syscall.SIGKILL)
	_ = a.Wait()
	if err := b.Wait(); err != nil {
		t.Fatalf("worker b: %v\n%s", err, bOut)
	}
	if !strings.Contains(bOut.String(), "this worker concluded the job") {
		t.Fatalf("worker b did not conclude the job:\n%s", bOut)
	}
	var per []string
	if err := probe.QueryRow(context.Background(), "SELECT groupArray(w) FROM (SELECT concat(worker, ':', toString(count())) AS w FROM work_claims WHERE job = ? AND state = 'done' GROUP BY worker ORDER BY worker)", job).Scan(&per); err != nil {
		t.Fatal(err)
	}
	t.Logf("slices done per worker (a killed): %v", per)
}

// analysisSnapshot is the current findings (id, severity, confidence,
// foreign tenants) and the latest notification list (tenant, role, tier,
// requests), sorted.
func analysisSnapshot(t *testing.T, s *chstore.Store) (findings, affected []string) {
	t.Helper()
	ctx := context.Background()
	fs, err := s.LatestFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		findings = append(findings, fmt.Sprintf("%s %s %.6f %v", f.ID, f.Severity, f.Confidence, f.ForeignTenants))
	}
	rec, err := analyze.LatestAffected(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rec.Rows {
		affected = append(affected, fmt.Sprintf("%s %s %s %d", a.Tenant, a.Role, a.Tier, a.Requests))
	}
	sort.Strings(findings)
	sort.Strings(affected)
	if len(findings) == 0 || len(affected) == 0 {
		t.Fatalf("%d findings, %d list rows: the comparison would prove nothing", len(findings), len(affected))
	}
	return findings, affected
}
