package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

// TestBenchDetectEndToEnd starts, through `kvtrail bench detect`, a real
// kvtrail serve (live analysis, canary probes) and a live simulated cluster
// pushing its logs to it. With the bug turned on, the prober and the log
// analyzers each raise a HIGH finding; in the control run (the reboot
// keeps the fixed version) neither raises anything and nothing leaks.
func TestBenchDetectEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers per run")
	}
	addr := testdb.Addr(t)
	for _, c := range []struct {
		name    string
		control bool
	}{{"bug on", false}, {"control", true}} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"bench", "detect", "--runs", "1", "--warmup", "6s", "--json", "--dir", t.TempDir()}
			if c.control {
				args = append(args, "--control", "--timeout", "25s")
			} else {
				args = append(args, "--timeout", "60s")
			}
			out, errOut, code := run(t, t.TempDir(), []string{"KVTRAIL_CLICKHOUSE_ADDR=" + addr}, args...)
			if code != 0 {
				t.Fatalf("bench detect exit %d: %s", code, errOut)
			}
			var res struct {
				Runs []struct {
					Leaked         int            `json:"leaked_responses"`
					ProbeLatency   time.Duration  `json:"probe_latency"`
					LogLatency     time.Duration  `json:"log_latency"`
					HighByAnalyzer map[string]int `json:"high_by_analyzer"`
				} `json:"runs"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Runs) != 1 {
				t.Fatalf("output: %v\n%s", err, out)
			}
			r := res.Runs[0]
			t.Logf("%s: %+v", c.name, r)
			if c.control {
				if r.Leaked != 0 || len(r.HighByAnalyzer) != 0 || r.ProbeLatency >= 0 || r.LogLatency >= 0 {
					t.Errorf("control run found something: %+v", r)
				}
				return
			}
			if r.Leaked == 0 || r.HighByAnalyzer["canary_probe"] == 0 || r.ProbeLatency < 0 || r.LogLatency < 0 {
				t.Errorf("bug on: %+v, want leaks and HIGH findings from canary_probe and a log analyzer", r)
			}
			if r.HighByAnalyzer["rejected_served"] == 0 && r.HighByAnalyzer["over_threshold"] == 0 && r.HighByAnalyzer["transfer_mismatch"] == 0 {
				t.Errorf("no log analyzer raised HIGH: %v", r.HighByAnalyzer)
			}
			if r.ProbeLatency > time.Minute || r.LogLatency > time.Minute {
				t.Errorf("latencies %s / %s over a minute", r.ProbeLatency, r.LogLatency)
			}
		})
	}
}
