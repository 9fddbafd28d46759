package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/simulate"
)

// benchCommands lets other files add `kvtrail bench X` subcommands.
var benchCommands []func(*app) *cobra.Command

func newBenchCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "Measure kvtrail against baselines in the same run"}
	c.AddCommand(newBenchIngestCmd(a), newBenchAnalyzeCmd(a))
	for _, f := range benchCommands {
		c.AddCommand(f(a))
	}
	return c
}

func newBenchIngestCmd(a *app) *cobra.Command {
	var scenario, dir string
	var scale float64
	var keep bool
	var runs int
	c := &cobra.Command{
		Use:   "ingest",
		Short: "Ingest a simulated incident end to end and compare with clickhouse-client loading the same lines",
		Long: `bench ingest writes a simulator dataset (or uses --dir), ingests it into a
fresh database with the full pipeline (raw_lines plus every typed table), then
loads the same physical lines with clickhouse-client into a plain table, and
prints lines/s for both and their ratio.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if dir == "" {
				tmp, err := os.MkdirTemp("", "kvtrail-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				if _, err := runSimulation(ctx, simulate.Config{Scenario: scenario, Seed: 1, Scale: scale, OutDir: tmp}); err != nil {
					return fmt.Errorf("simulate: %w", err)
				}
				dir = tmp
			}
			sources, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
			if err != nil {
				return err
			}
			if runs < 1 {
				return usageError{fmt.Errorf("--runs must be at least 1, got %d", runs)}
			}
			if a.cfg.ClickHouse.Embedded() {
				// Its baseline is clickhouse-client loading the lines over
				// the native protocol: there is no server to load into.
				return usageError{fmt.Errorf("bench ingest needs a ClickHouse server (its baseline is clickhouse-client); " +
					"for the embedded engine time `kvtrail ingest` on both engines (docs/clickhouse.md, \"The embedded engine\")")}
			}
			defer a.governMemory()()
			s, closeFn, err := a.benchStore(ctx, keep)
			if err != nil {
				return err
			}
			defer closeFn()
			w := cmd.OutOrStdout()
			var ratios, cpuRatios []float64
			for run := 1; run <= runs; run++ {
				if run > 1 {
					if err := bench.Reset(ctx, s); err != nil {
						return err
					}
				}
				res, err := bench.Ingest(ctx, s, a.chAddrs[0], sources, ingest.Options{Logger: a.log})
				if err != nil {
					return err
				}
				if runs > 1 {
					fmt.Fprintf(w, "-- run %d of %d\n", run, runs)
				}
				if run == 1 {
					fmt.Fprintf(w, "dataset: %d sources, %d lines (%d records), %.1f MB\n", res.Sources, res.Lines, res.Records, float64(res.Bytes)/1e6)
				}
				fmt.Fprintf(w, "kvtrail ingest (raw_lines + typed tables): %8.2fs  %10.0f lines/s  %6.1f MB/s\n",
					res.Kvtrail.Seconds(), res.LinesPerSec(), float64(res.Bytes)/1e6/res.Kvtrail.Seconds())
				fmt.Fprintf(w, "baseline clickhouse-client raw load:       %8.2fs  %10.0f lines/s  (%d rows)\n",
					res.Baseline.Seconds(), res.BaselineLinesPerSec(), res.BaselineRows)
				fmt.Fprintf(w, "ratio kvtrail/baseline: %.2f   peak RSS: %.0f MB\n", res.Ratio(), float64(res.PeakRSSBytes)/1e6)
				fmt.Fprintf(w, "server floor (ClickHouse re-storing kvtrail's rows, no client): %.2fs  ceiling ratio %.2f\n",
					res.ServerFloor.Seconds(), res.CeilingRatio())
				fmt.Fprintf(w, "CPU: kvtrail %.2fs + server %.2fs, baseline client %.2fs + server %.2fs  CPU ratio %.2f\n",
					res.KvtrailCPU.Seconds(), res.KvtrailServerCPU.Seconds(), res.BaselineCPU.Seconds(), res.BaselineServerCPU.Seconds(), res.CPURatio())
				ratios = append(ratios, res.Ratio())
				cpuRatios = append(cpuRatios, res.CPURatio())
			}
			if runs > 1 {
				slices.Sort(ratios)
				slices.Sort(cpuRatios)
				fmt.Fprintf(w, "== ratio over %d runs: median %.2f, min %.2f, max %.2f\n", runs, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
				fmt.Fprintf(w, "== CPU ratio over %d runs: median %.2f, min %.2f, max %.2f\n", runs, cpuRatios[len(cpuRatios)/2], cpuRatios[0], cpuRatios[len(cpuRatios)-1])
			}
			return nil
		},
	}
	c.Flags().StringVar(&scenario, "scenario", "incident-2026", "simulator scenario to generate")
	c.Flags().Float64Var(&scale, "scale", 0.2, "simulator scale")
	c.Flags().StringVar(&dir, "dir", "", "use this existing dataset (a directory with sources.yaml) instead of simulating")
	c.Flags().BoolVar(&keep, "keep", false, "keep the benchmark database")
	c.Flags().IntVar(&runs, "runs", 1, "measure this many times (the same data, emptied tables) and print the median ratio")
	return c
}

func newBenchAnalyzeCmd(a *app) *cobra.Command {
	var scenario string
	var scale float64
	var pageSize int
	var keep bool
	c := &cobra.Command{
		Use:   "analyze",
		Short: "Time each analyzer and the affected reconstruction against one ClickHouse scan of the same data",
		Long: `bench analyze simulates a dataset (scenario, scale; 1M requests is
incident-2026 at --scale 10), ingests it into a fresh database, then times
loading the window, each analyzer and the affected-customer reconstruction,
and, as the baseline in the same run, one read of every column the run
reads from each table with the analyzers' filters, streamed to the client
and discarded. Then it times the whole analysis again, alternately without
the allocator replay (every victim falls back to its node/rank window) and
with it, on the same data, and prints the ratio of the medians: what the
replay costs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPageSize(pageSize); err != nil {
				return err
			}
			ctx := cmd.Context()
			dir, err := os.MkdirTemp("", "kvtrail-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			w := cmd.OutOrStdout()
			sum, err := runSimulation(ctx, simulate.Config{Scenario: scenario, Seed: 1, Scale: scale, PageSize: pageSize, OutDir: dir})
			if err != nil {
				return fmt.Errorf("simulate: %w", err)
			}
			fmt.Fprintf(w, "dataset: %s scale %g%s, %d requests\n", scenario, scale, pageSizeNote(pageSize), sum.Requests)
			sources, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
			if err != nil {
				return err
			}
			s, closeFn, err := a.benchStore(ctx, keep)
			if err != nil {
				return err
			}
			defer closeFn()
			isum, err := ingest.New(s, ingest.Options{Logger: a.log}).Ingest(ctx, sources)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "ingested %d records in %.1fs\n\n", isum.Total.Records, isum.Seconds)
			// Under the soft memory limit `kvtrail analyze` runs under, so
			// the ratios are of the analysis users run.
			stopLimit := setMemoryLimit(a.cfg.Analyze.MemoryLimitMB, a.log)
			res, err := bench.Analyze(ctx, s, a.analyzeConfig(), analyze.Window{})
			stopLimit()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "window %s, %d request facts\n", res.Window, res.Requests)
			fmt.Fprintf(w, "  %-38s %9.3fs\n", "load + correlate + save request_facts", res.Load.Seconds())
			for _, x := range res.Analyzers {
				fmt.Fprintf(w, "  %-38s %9.3fs  (%d findings)\n", "analyzer "+x.Name, x.Duration.Seconds(), x.Rows)
			}
			fmt.Fprintf(w, "  %-38s %9.3fs  (%d rows)\n", "affected reconstruction", res.Reconstr.Seconds(), res.Tenants)
			fmt.Fprintf(w, "  %-38s %9.3fs\n\nbaseline: the columns the analysis reads, same filters, streamed and discarded\n", "total", res.Total().Seconds())
			for _, x := range res.Scans {
				fmt.Fprintf(w, "  %-38s %9.3fs  (%d rows)\n", x.Name, x.Duration.Seconds(), x.Rows)
			}
			fmt.Fprintf(w, "  %-38s %9.3fs\n\nratio analysis/scan: %.1f\n", "total", res.ScanTotal().Seconds(),
				res.Total().Seconds()/res.ScanTotal().Seconds())
			with, without := res.Replay.Median()
			fmt.Fprintf(w, "\nallocator replay cost: the whole analysis again, alternately without and with the replay, same data\n")
			fmt.Fprintf(w, "  %-38s %9.3fs  (median of %s)\n", "without replay", without.Seconds(), fmtRuns(res.Replay.Without))
			fmt.Fprintf(w, "  %-38s %9.3fs  (median of %s)\n", "with replay", with.Seconds(), fmtRuns(res.Replay.With))
			fmt.Fprintf(w, "ratio with/without replay: %.2f (target <= 1.20)\n", res.Replay.Ratio())
			fmt.Fprintf(w, "  kvtrail CPU (user+sys) without replay: median of %s; with: median of %s\n",
				fmtRuns(res.Replay.WithoutCPU), fmtRuns(res.Replay.WithCPU))
			fmt.Fprintf(w, "CPU ratio with/without replay: %.2f (kvtrail's process only; steadier than wall time on a busy machine)\n", res.Replay.CPURatio())
			return nil
		},
	}
	c.Flags().StringVar(&scenario, "scenario", "incident-2026", "simulator scenario")
	c.Flags().Float64Var(&scale, "scale", 0.5, "simulator scale (incident-2026: ~100k requests per 1.0)")
	pageSizeFlag(c, &pageSize)
	c.Flags().BoolVar(&keep, "keep", false, "keep the benchmark database")
	return c
}

// fmtRuns lists run times in seconds: "5.102s, 5.310s".
func fmtRuns(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.3fs", d.Seconds())
	}
	return strings.Join(parts, ", ")
}

func init() { extraCommands = append(extraCommands, newBenchCmd) }

// benchStore opens a fresh, migrated database for one benchmark run; the
// returned func drops it (unless keep) and closes the store.
func (a *app) benchStore(ctx context.Context, keep bool) (*chstore.Store, func(), error) {
	a.cfg.ClickHouse.Database = fmt.Sprintf("kvtrail_bench_%d", os.Getpid())
	s, closeFn, err := a.openMigrated(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s, func() {
		if !keep {
			_ = s.DropDatabase(context.WithoutCancel(ctx), s.Database())
		}
		closeFn()
	}, nil
}
