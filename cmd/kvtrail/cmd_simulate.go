package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/simulate"
)

// newSimulateCmd is `kvtrail simulate`: it writes a simulated PD cluster's
// logs, metrics, sources manifest and truth.json into --out.
func newSimulateCmd() *cobra.Command {
	var cfg simulate.Config
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Simulate an SGLang PD deployment and write its logs plus ground truth",
		Long: "simulate runs a deterministic discrete-event simulation of an SGLang prefill/decode\n" +
			"deployment with Mooncake transfer and writes per-node SGLang and Mooncake logs, gateway\n" +
			"JSON access logs, Prometheus snapshots, optional page events, sources.yaml and truth.json.\n" +
			"Scenarios: " + strings.Join(simulate.Scenarios(), ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			sum, err := runSimulation(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d requests, %d affected, %d tenants received foreign data, %d possibly exposed, %d look-alikes; %d files, %d lines, %.1f MB in %s\n",
				sum.Scenario, sum.Requests, sum.Affected, sum.AffectedTenants, sum.ExposedTenants, sum.Lookalikes,
				sum.Files, sum.Lines, float64(sum.Bytes)/(1<<20), cfg.OutDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Scenario, "scenario", "incident-2026", "scenario: "+strings.Join(simulate.Scenarios(), ", "))
	f.Int64Var(&cfg.Seed, "seed", 1, "random seed; the same seed gives the same bytes")
	f.Float64Var(&cfg.Scale, "scale", 1, "traffic multiplier")
	f.StringVar(&cfg.OutDir, "out", "", "output directory (required)")
	f.IntVar(&cfg.Days, "days", 0, "override the scenario's length in days")
	f.IntVar(&cfg.Tenants, "tenants", 0, "override the number of tenants")
	f.IntVar(&cfg.Prefill, "prefill", 0, "override the number of prefill instances (the last is the canary if the scenario has one)")
	f.IntVar(&cfg.Decode, "decode", 0, "override the number of decode instances")
	f.BoolVar(&cfg.PageEvents, "page-events", false, "also write page-level KV events (engine debug tracing)")
	f.BoolVar(&cfg.MooncakeSeparate, "mooncake-separate", false, "write Mooncake glog lines to <node>.mooncake.log instead of into the engine log")
	f.IntVar(&cfg.DecodePool, "decode-pool", 0, "override the decode KV pool per DP rank in tokens (small pools run nearly full)")
	f.IntVar(&cfg.PageSize, "page-size", 0, "override every engine's page_size in tokens (default 64; 1 is SGLang's default, allocated by TokenToKVPoolAllocator)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func init() {
	extraCommands = append(extraCommands, func(a *app) *cobra.Command {
		c := newSimulateCmd()
		c.AddCommand(newSimulateServeCmd(a))
		return c
	})
}

// runSimulation is simulate.Run at simulate.TightGC's GOGC, restored after:
// every command that simulates (simulate, demo and the benches) goes
// through it, so none holds twice a page-size-1 simulation's pools.
func runSimulation(ctx context.Context, cfg simulate.Config) (*simulate.Summary, error) {
	defer simulate.TightGC()()
	return simulate.Run(ctx, cfg)
}
