package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/simulate"
	"github.com/kvtrail/kvtrail/web"
)

const demoCaseName = "Demo: incident-2026 (rejected-placeholder KV reuse)"

func newDemoCmd(a *app) *cobra.Command {
	var scale float64
	var seed int64
	c := &cobra.Command{
		Use:   "demo",
		Short: "Simulate the 2026 incident, ingest and analyze it, and serve the UI on it",
		Long: `demo is the first thing to run. With no ClickHouse configured it starts a
private clickhouse-server under local.data_dir (reused by the next run); with
--engine embedded it runs ClickHouse 26.7 inside kvtrail instead, with its
data under local.embedded_dir (libchdb.so: scripts/demo.sh fetches it). It
then simulates the incident-2026 scenario (a PD cluster whose prefill KV
pool is smaller than the advertised context), ingests the logs and metrics,
runs every analyzer, opens a case on the incident and serves kvtrail until
Ctrl-C. A second run reuses the simulated data and skips what is already
ingested.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			a.limitMemory()
			s, closeFn, err := a.openMigrated(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			dir := filepath.Join(a.dataRoot(), "demo-incident")
			truth, err := a.demoData(ctx, out, dir, scale, seed)
			if err != nil {
				return err
			}
			if err := a.demoIngest(ctx, out, s, dir); err != nil {
				return err
			}
			login := ""
			if len(a.cfg.Auth.Users) == 0 {
				u, err := web.DemoUser()
				if err != nil {
					return err
				}
				a.cfg.Auth.Users = []config.User{u}
				login = fmt.Sprintf("Log in as %s / %s (role %s).\n", u.Name, web.DemoPassword, u.Role)
			}
			cs, err := web.SeedCase(ctx, a.uiStore(s), demoCaseName, truth.Start, truth.End.Add(24*time.Hour),
				"Opened by kvtrail demo on the simulated incident-2026 data. Press \"Run analyzers\" to rebuild the affected list for this case.", "demo")
			if err != nil {
				return fmt.Errorf("open demo case: %w", err)
			}
			fmt.Fprintln(out, "==> analyzing the case window")
			cfg := a.analyzeConfig()
			r := &analyze.Runner{DB: s, Cfg: cfg, Analyzers: analyze.All(cfg), Trigger: "case", CaseID: cs.ID, Log: a.log, Lean: true}
			rep, err := r.Run(ctx, analyze.Window{From: cs.From, To: cs.To}, nil)
			if err != nil {
				return fmt.Errorf("analyze demo case: %w", err)
			}
			var findings, high int
			for _, run := range rep.Runs {
				findings += run.Run.Findings
				high += run.Run.High
			}
			fmt.Fprintf(out, "    %d findings (%d HIGH); the simulator's truth: %d affected responses, %d tenants received foreign data\n",
				findings, high, len(truth.Affected), len(truth.ReceivedForeignData))
			return a.serve(ctx, s, func(url string) {
				fmt.Fprintf(out, "\nkvtrail is up: %s/cases/%s\n%sHealth: %s/readyz. Press Ctrl-C to stop; data stays in %s.\n\n",
					url, cs.ID, login, url, a.dataRoot())
			})
		},
	}
	c.Flags().String("addr", "", "listen address host:port (default 127.0.0.1:8080)")
	bindFlag(c.Flags().Lookup("addr"), "serve.addr")
	c.Flags().Float64Var(&scale, "scale", 0.1, "simulator traffic scale of the demo incident")
	c.Flags().Int64Var(&seed, "seed", 1, "simulator seed")
	return c
}

// demoData simulates the incident into dir unless it is already there.
func (a *app) demoData(ctx context.Context, out io.Writer, dir string, scale float64, seed int64) (*simulate.Truth, error) {
	truthPath := filepath.Join(dir, "truth.json")
	if _, err := os.Stat(truthPath); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "==> simulating incident-2026 (scale %g) into %s\n", scale, dir)
		tmp := dir + ".partial"
		_ = os.RemoveAll(tmp)
		sum, err := runSimulation(ctx, simulate.Config{Scenario: "incident-2026", Seed: seed, Scale: scale, OutDir: tmp})
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		// Rename last: an interrupted simulation is never mistaken for data.
		if err := os.Rename(tmp, dir); err != nil {
			return nil, err
		}
		a.log.Debug("simulated", slog.Any("summary", sum))
	} else if err != nil {
		return nil, err
	} else {
		fmt.Fprintf(out, "==> reusing the simulated incident in %s\n", dir)
	}
	return simulate.LoadTruth(truthPath)
}

func (a *app) demoIngest(ctx context.Context, out io.Writer, s *chstore.Store, dir string) error {
	sources, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==> ingesting %d sources (already ingested ones are skipped)\n", len(sources))
	sum, err := ingest.New(s, ingest.Options{Logger: a.log}).Ingest(ctx, sources)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	fmt.Fprintf(out, "    %d records (%d parsed, %d unknown, %d malformed) in %.1fs\n",
		sum.Total.Records, sum.Total.Parsed, sum.Total.Unknown, sum.Total.Malformed, sum.Seconds)
	return nil
}
