package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/bench"
)

func newBenchPushCmd(a *app) *cobra.Command {
	cfg := bench.PushConfig{}
	var keep bool
	c := &cobra.Command{
		Use:   "push",
		Short: "Soak the push path: many shippers, a ClickHouse outage in the middle, every acknowledged line checked",
		Long: `bench push starts a private ClickHouse and an in-process push server wired
as serve wires it (spool as write-ahead log, drain, in-flight bound), then
--clients shippers push NDJSON for --duration, retrying on 503 or errors as
shippers do. ClickHouse is stopped for --outage in the middle. Afterwards it
waits for the spool to drain and compares the lines acknowledged with the
distinct lines stored and the lines ingest_sources counts (all must be
equal). Last, it measures the drain of a spooled backlog against the file
ingest path on the same lines, in the same run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.limitMemory()
			cfg.MemoryLimit = a.cfg.MemoryLimit
			dir, err := os.MkdirTemp("", "kvtrail-bench-push-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			cfg.Dir, cfg.Log, cfg.Progress = dir, a.log, cmd.ErrOrStderr()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "push soak: %d clients x %s, %d lines per push, ClickHouse outage %s in the middle\n",
				cfg.Clients, cfg.Duration, cfg.LinesPerPush, cfg.Outage)
			r, err := bench.Push(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			secs := r.Elapsed.Seconds()
			fmt.Fprintf(w, "pushes: %d in %.0fs (%.1f pushes/s, %.0f lines/s acknowledged), %d retries\n",
				r.Pushes, secs, float64(r.Pushes)/secs, float64(r.Acked)/secs, r.Retries)
			fmt.Fprintf(w, "latency per push (first attempt to 204): p50 %s  p99 %s  longest wait %s\n",
				r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond))
			fmt.Fprintf(w, "lines: acknowledged %d  stored (distinct) %d  counted in ingest_sources %d  quarantined pushes %d\n",
				r.Acked, r.Stored, r.Counted, r.Quarantined)
			fmt.Fprintf(w, "drain: max lag %.1fs; backlog caught up %.1fs after ClickHouse restarted (%d lines, %.0f lines/s while pushes continued)\n",
				r.MaxLagSeconds, r.CatchUp.Seconds(), r.CatchUpLines, float64(r.CatchUpLines)/max(r.CatchUp.Seconds(), 1e-9))
			if r.DrainPerSec > 0 {
				fmt.Fprintf(w, "drain of a spooled backlog: %.0f lines/s; file ingest path, same lines: %.0f lines/s; ratio %.2f\n",
					r.DrainPerSec, r.FilePerS, r.DrainPerSec/r.FilePerS)
			}
			fmt.Fprintf(w, "peak RSS (server and clients in one process): %.0f MB\n", float64(r.PeakRSSBytes)/1e6)
			if r.Acked != r.Stored || r.Acked != r.Counted {
				return fmt.Errorf("acknowledged %d lines, stored %d, counted %d: they must be equal", r.Acked, r.Stored, r.Counted)
			}
			return nil
		},
	}
	c.Flags().IntVar(&cfg.Clients, "clients", 50, "concurrent shippers")
	c.Flags().DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long the shippers push")
	c.Flags().DurationVar(&cfg.Outage, "outage", time.Minute, "ClickHouse is stopped this long in the middle (0: no outage)")
	c.Flags().IntVar(&cfg.LinesPerPush, "lines", 200, "lines per push")
	c.Flags().DurationVar(&cfg.Pause, "pause", time.Second, "each shipper's pause between pushes (promtail sends a batch about every second)")
	c.Flags().IntVar(&cfg.DrainLines, "drain-lines", 200_000, "lines for the drain-speed measurement (0: skip)")
	c.Flags().BoolVar(&keep, "keep", false, "keep the work directory (ClickHouse data, spool)")
	return c
}

func init() { benchCommands = append(benchCommands, newBenchPushCmd) }
