package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/bench"
)

func init() {
	benchCommands = append(benchCommands, newBenchDetectCmd)
}

func newBenchDetectCmd(a *app) *cobra.Command {
	var (
		opts   bench.DetectOptions
		asJSON bool
		keep   bool
		off    bool
	)
	c := &cobra.Command{
		Use:   "detect [--runs N]",
		Short: "Time from the first leaked response to the prober's and the log analyzers' findings, on a live simulated cluster",
		Long: `bench detect starts kvtrail serve (live analysis every 2 s, canary probes on) and
kvtrail simulate serve pushing its logs to it, runs background traffic and
probes for --warmup, then turns the bug on (reboots the prefill with a KV
pool below the context length on SGLang 0.5.11) and measures, from the first
leaked response, the time until (a) a HIGH canary_probe finding and (b) a HIGH
finding of a log analyzer. It prints each run and the p50 and max. With
--control the reboot keeps the fix (0.5.22) and neither may raise anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Binary, opts.BugOn, opts.Log = bin, !off, a.log
			if a.cfg.ClickHouse.Embedded() {
				// It runs a second kvtrail (the serve) on the same data:
				// the embedded store serves one process.
				return usageError{fmt.Errorf("bench detect needs a ClickHouse server: it runs a kvtrail serve on the same database, and the embedded engine serves one process")}
			}
			s, closeFn, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			opts.ClickHouseAddr = a.chAddrs[0]
			opts.ClickHouseUser, opts.ClickHousePassword = a.cfg.ClickHouse.Username, a.cfg.ClickHouse.Password.Reveal()
			if opts.Dir == "" {
				d, err := os.MkdirTemp("", "kvtrail-detect-")
				if err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(d)
				}
				opts.Dir = d
			}
			runs, err := bench.Detect(ctx, s, opts)
			if err != nil {
				return err
			}
			return printDetect(cmd, runs, asJSON, opts.BugOn)
		},
	}
	f := c.Flags()
	f.IntVar(&opts.Runs, "runs", 3, "runs (each with fresh processes and database)")
	f.DurationVar(&opts.Warmup, "warmup", 8*time.Second, "traffic before the bug is turned on")
	f.DurationVar(&opts.Timeout, "timeout", 90*time.Second, "wait per run for the findings (control: how long nothing may happen)")
	f.Float64Var(&opts.Rate, "rate", 5, "background requests per second")
	f.StringVar(&opts.Dir, "dir", "", "keep each run's config and process logs here")
	f.BoolVar(&keep, "keep", false, "keep the temporary run directory")
	f.BoolVar(&off, "control", false, "control runs: the reboot keeps the fixed version; nothing may be found")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func printDetect(cmd *cobra.Command, runs []bench.DetectRun, asJSON, bugOn bool) error {
	var probe, logs []time.Duration
	for _, r := range runs {
		probe, logs = append(probe, r.ProbeLatency), append(logs, r.LogLatency)
	}
	pp50, pmax, pmiss := bench.Percentiles(probe)
	lp50, lmax, lmiss := bench.Percentiles(logs)
	w := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"runs": runs, "probe_p50": pp50, "probe_max": pmax, "probe_missing": pmiss,
			"log_p50": lp50, "log_max": lmax, "log_missing": lmiss})
	}
	for i, r := range runs {
		fmt.Fprintf(w, "run %d: first leak %s after the bug was turned on, %d leaked responses; prober finding %s, log analyzers' finding %s; HIGH by analyzer %v\n",
			i+1, since(r.BugOn, r.FirstLeak), r.Leaked, lat(r.ProbeLatency), lat(r.LogLatency), r.HighByAnalyzer)
	}
	if !bugOn {
		fmt.Fprintln(w, "control: the fixed version was kept; any finding above is a false positive")
		return nil
	}
	fmt.Fprintf(w, "time from the first leaked response to the finding over %d runs: prober p50 %s max %s (missing %d); log analyzers p50 %s max %s (missing %d)\n",
		len(runs), lat(pp50), lat(pmax), pmiss, lat(lp50), lat(lmax), lmiss)
	return nil
}

func lat(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.Round(100 * time.Millisecond).String()
}

func since(from, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(from).Round(100 * time.Millisecond).String()
}
