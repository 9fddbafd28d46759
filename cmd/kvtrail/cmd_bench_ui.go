package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/simulate"
)

func init() { benchCommands = append(benchCommands, newBenchUICmd) }

func newBenchUICmd(a *app) *cobra.Command {
	var scenario, dir, database string
	var scale float64
	var keep, drop bool
	var samples, warm int
	c := &cobra.Command{
		Use:   "ui",
		Short: "Time the UI's pages (p50/p95, cold and warm) on a simulated incident, against a key read and a line scan",
		Long: `bench ui simulates a dataset (incident-2026 at --scale 10 is ~1M requests),
ingests it into a fresh database and analyzes it, or uses --database, an
existing database that already holds ingested and analyzed data. It then
serves the UI over real HTTP and opens, per page type (request page, finding
detail, evidence line, overview, findings list, tenant search), --samples
distinct URLs once cold (ClickHouse's mark and uncompressed caches dropped
first) and --warm more times each, and prints p50/p95 server times. The
baseline in the same run is one id_index primary-key read and one raw_lines
scan for a line id (what the slow pages did before they were keyed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			tmp, err := os.MkdirTemp("", "kvtrail-bench-ui-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			if database != "" {
				a.cfg.ClickHouse.Database = database
			}
			var s interface{ Database() string }
			var run func() (bench.UIResult, error)
			if database != "" {
				st, closeFn, err := a.openMigrated(ctx)
				if err != nil {
					return err
				}
				defer closeFn()
				s = st
				run = func() (bench.UIResult, error) {
					return bench.UI(ctx, st, bench.UIOptions{Samples: samples, Warm: warm, Logger: a.log, DropCaches: drop, ExportDir: filepath.Join(tmp, "exports"),
						GapThreshold: a.analyzeConfig().GapThreshold})
				}
			} else {
				if dir == "" {
					dir = filepath.Join(tmp, "data")
					sum, err := runSimulation(ctx, simulate.Config{Scenario: scenario, Seed: 1, Scale: scale, OutDir: dir})
					if err != nil {
						return fmt.Errorf("simulate: %w", err)
					}
					fmt.Fprintf(w, "dataset: %s scale %g, %d requests\n", scenario, scale, sum.Requests)
				}
				sources, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
				if err != nil {
					return err
				}
				st, closeFn, err := a.benchStore(ctx, keep)
				if err != nil {
					return err
				}
				defer closeFn()
				s = st
				isum, err := ingest.New(st, ingest.Options{Logger: a.log}).Ingest(ctx, sources)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "ingested %d records in %.1fs\n", isum.Total.Records, isum.Seconds)
				cfg := a.analyzeConfig()
				r := &analyze.Runner{DB: st, Cfg: cfg, Analyzers: analyze.All(cfg), Trigger: "bench"}
				if _, err := r.Run(ctx, analyze.Window{}, nil); err != nil {
					return fmt.Errorf("analyze: %w", err)
				}
				run = func() (bench.UIResult, error) {
					return bench.UI(ctx, st, bench.UIOptions{Samples: samples, Warm: warm, Logger: a.log, DropCaches: drop, ExportDir: filepath.Join(tmp, "exports"),
						GapThreshold: a.analyzeConfig().GapThreshold})
				}
			}
			res, err := run()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "database %s: %d gateway responses, %d raw lines\n", s.Database(), res.Requests, res.Lines)
			fmt.Fprintf(w, "%-16s %5s %10s %10s %10s %10s\n", "page", "urls", "cold p50", "cold p95", "warm p50", "warm p95")
			for _, p := range res.Pages {
				fmt.Fprintf(w, "%-16s %5d %10s %10s %10s %10s\n", p.Page, p.URLs, ms(bench.P(p.Cold, .5)), ms(bench.P(p.Cold, .95)),
					ms(bench.P(p.Warm, .5)), ms(bench.P(p.Warm, .95)))
			}
			fmt.Fprintf(w, "baseline: id_index key read p50 %s; raw_lines line-id scan p50 %s\n", ms(res.KeyRead), ms(res.LineScan))
			for _, p := range res.Pages {
				if res.LineScan > 0 {
					fmt.Fprintf(w, "  %-16s warm p95 / line scan = %.2f   cold p95 / line scan = %.2f\n", p.Page,
						bench.P(p.Warm, .95).Seconds()/res.LineScan.Seconds(), bench.P(p.Cold, .95).Seconds()/res.LineScan.Seconds())
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&scenario, "scenario", "incident-2026", "simulator scenario")
	c.Flags().Float64Var(&scale, "scale", 1, "simulator scale (incident-2026: ~100k requests per 1.0)")
	c.Flags().StringVar(&dir, "dir", "", "use this existing dataset (a directory with sources.yaml) instead of simulating")
	c.Flags().StringVar(&database, "database", "", "use this database's ingested and analyzed data (nothing is simulated or dropped)")
	c.Flags().BoolVar(&keep, "keep", false, "keep the benchmark database")
	c.Flags().BoolVar(&drop, "drop-caches", true, "drop ClickHouse's mark and uncompressed caches before each cold visit")
	c.Flags().IntVar(&samples, "samples", 20, "distinct URLs per page type")
	c.Flags().IntVar(&warm, "warm", 3, "warm repeats per URL")
	return c
}

func ms(d interface{ Seconds() float64 }) string { return fmt.Sprintf("%.1f ms", d.Seconds()*1000) }
