package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// TestAnalysisMemoryBounded analyzes a window and one ten times longer
// (ten times the requests), each by its own `kvtrail analyze` process, and
// compares the processes' peak RSS: analysis in slices holds a slice, not
// the window, so the larger window may not take 30% more. By default the
// incident is small (scale 0.5, windows of about 5,000 and 50,000
// requests) and the slices scaled down with it (500 requests), so CI runs
// it in a few minutes; KVTRAIL_RSS_SCALES=2,20 instead analyzes two whole
// incidents of those scales, each ingested on its own, with the default
// slices (the sizes of issue #16; docs/cluster.md has that run's figures).
func TestAnalysisMemoryBounded(t *testing.T) {
	if v := os.Getenv("KVTRAIL_RSS_SCALES"); v != "" {
		var scales []float64
		for _, f := range strings.Split(v, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || x <= 0 {
				t.Fatalf("KVTRAIL_RSS_SCALES=%q: %q is not a scale", v, f)
			}
			scales = append(scales, x)
		}
		if len(scales) != 2 {
			t.Fatalf("KVTRAIL_RSS_SCALES=%q: want two scales", v)
		}
		var rss [2]int64
		for i, scale := range scales {
			env, _ := ingestIncident(t, scale, "100000")
			rss[i] = analyzeRSS(t, env, fmt.Sprintf("scale %g", scale))
		}
		compareRSS(t, rss, fmt.Sprintf("scale %g", scales[0]), fmt.Sprintf("scale %g", scales[1]))
		return
	}
	env, s := ingestIncident(t, 0.5, "500")
	var lo, hi uint64
	if err := s.QueryRow(context.Background(), "SELECT min(ts_ns), max(ts_ns) FROM gateway_responses").Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	from, to := time.Unix(0, int64(lo)).UTC(), time.Unix(0, int64(hi)).UTC()
	tenth := from.Add(to.Sub(from) / 10)
	var rss [2]int64
	rss[0] = analyzeRSS(t, env, "a tenth of the incident", "--from", from.Format(time.RFC3339Nano), "--to", tenth.Format(time.RFC3339Nano))
	rss[1] = analyzeRSS(t, env, "the whole incident")
	compareRSS(t, rss, "a tenth", "the whole incident")
}

// ingestIncident simulates incident-2026 at scale into a fresh database
// and returns the environment that points kvtrail at it.
func ingestIncident(t *testing.T, scale float64, slice string) ([]string, *chstore.Store) {
	t.Helper()
	sim := t.TempDir()
	if _, err := simulate.Run(context.Background(), simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: scale, OutDir: sim}); err != nil {
		t.Fatal(err)
	}
	s := testdb.New(t)
	// A soft limit below the live heap: the limit then follows the live
	// heap (internal/memlimit), so peak RSS shows what the analysis holds.
	// Under the default 512 MiB the collector waits for the limit, and both
	// windows would sit near it whatever they held.
	env := []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database(),
		"KVTRAIL_ANALYZE_SLICE_REQUESTS=" + slice, "KVTRAIL_ANALYZE_MEMORY_LIMIT_MB=64"}
	if _, errOut, code := run(t, t.TempDir(), env, "ingest", "--manifest", filepath.Join(sim, "sources.yaml")); code != 0 {
		t.Fatalf("ingest scale %g: exit %d\n%s", scale, code, errOut)
	}
	_ = os.RemoveAll(sim) // the logs are in ClickHouse now; keep the disk for what follows
	return env, s
}

// analyzeRSS runs `kvtrail analyze args...` and returns its peak RSS.
func analyzeRSS(t *testing.T, env []string, what string, args ...string) int64 {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"analyze"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("analyze %s: %v\n%s", what, err, out)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
	timings := ""
	if _, after, ok := strings.Cut(string(out), "\ntimings:\n"); ok {
		timings = "\n" + after
	}
	t.Logf("%s: analysis peak RSS %s, %s of CPU%s", what, mb(rss),
		(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Round(time.Millisecond), timings)
	return rss
}

func compareRSS(t *testing.T, rss [2]int64, small, large string) {
	t.Helper()
	if float64(rss[1]) > 1.3*float64(rss[0]) {
		t.Errorf("analysis peak RSS grew from %s (%s) to %s (%s): more than 30%%", mb(rss[0]), small, mb(rss[1]), large)
	}
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
