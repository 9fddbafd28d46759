package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/ingest/promimport"
)

func newMetricsCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "metrics",
		Short: "Bring Prometheus metrics in from a Prometheus server or live /metrics endpoints",
		Long: `metrics copies SGLang's Prometheus metrics into ClickHouse (metric_samples),
next to the logs, so a postmortem can ask what each node's KV pool and limits
were when a request ran. Metric *files* go through "kvtrail ingest"; see
docs/metrics.md.`,
	}
	c.AddCommand(newMetricsImportCmd(a), newMetricsScrapeCmd(a))
	return c
}

func newMetricsImportCmd(a *app) *cobra.Command {
	var (
		promURL, from, to, nodeLabel string
		queries, nodeMap             []string
		step, timeout                time.Duration
		asJSON                       bool
	)
	c := &cobra.Command{
		Use:   "import --prometheus URL --from T --to T",
		Short: "Import series from a Prometheus server over a time window (query_range)",
		Long: `import evaluates each --query (a PromQL selector; default every sglang:*
series) from --from to --to every --step through Prometheus' HTTP API and
stores the samples. Long windows are split so no call exceeds Prometheus'
11,000 points per series. Re-running an import does not duplicate samples.

Times are RFC 3339 (2026-11-28T09:30:00Z) or unix seconds. Set --step to the
scrape interval to copy every sample. The node of a series is the value of
--node-label, renamed by --node-map to the node names your logs use.`,
		Example: `  kvtrail metrics import --prometheus http://prom:9090 \
    --from 2026-11-28T08:00:00Z --to 2026-11-28T12:00:00Z --step 15s \
    --node-map 10.0.1.1:30000=prefill-0 --node-map 10.0.2.1:30000=decode-0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if promURL == "" || from == "" || to == "" {
				return usageError{errors.New("--prometheus, --from and --to are required")}
			}
			r := promimport.Range{Queries: queries, Step: step, NodeLabel: nodeLabel}
			var err error
			if r.From, err = promimport.ParseTime(from); err != nil {
				return usageError{fmt.Errorf("--from: %w", err)}
			}
			if r.To, err = promimport.ParseTime(to); err != nil {
				return usageError{fmt.Errorf("--to: %w", err)}
			}
			if r.To.Before(r.From) {
				return usageError{errors.New("--to is before --from")}
			}
			if step <= 0 {
				return usageError{errors.New("--step must be positive")}
			}
			if r.NodeMap, err = promimport.ParseNodeMap(nodeMap); err != nil {
				return usageError{fmt.Errorf("--node-map: %w", err)}
			}
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			im := &promimport.Importer{Store: s, CallTimeout: timeout, Logger: a.log}
			start := time.Now()
			st, importErr := im.ImportRange(cmd.Context(), promURL, r)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "imported %d samples of %d series in %d query_range calls (%.1fs)\n",
					st.Samples, st.Series, st.Calls, time.Since(start).Seconds())
				if st.NoNode > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "%d series had no %q label: their node is empty\n", st.NoNode, r.NodeLabel)
				}
				for _, w := range st.Warnings {
					fmt.Fprintf(cmd.OutOrStdout(), "prometheus warning: %s\n", w)
				}
			}
			return importErr
		},
	}
	f := c.Flags()
	f.StringVar(&promURL, "prometheus", "", "Prometheus base URL, e.g. http://prom:9090 (a path prefix is kept)")
	f.StringVar(&from, "from", "", "start of the window: RFC 3339 or unix seconds")
	f.StringVar(&to, "to", "", "end of the window (inclusive): RFC 3339 or unix seconds")
	f.DurationVar(&step, "step", promimport.DefaultStep, "evaluation step; the scrape interval copies every sample")
	// StringArray, not StringSlice: PromQL selectors contain commas.
	f.StringArrayVar(&queries, "query", nil, "PromQL selector to import (repeatable; default "+promimport.DefaultQuery+")")
	f.StringVar(&nodeLabel, "node-label", promimport.DefaultNodeLabel, "label whose value names the node")
	f.StringArrayVar(&nodeMap, "node-map", nil, "rename a node-label value: VALUE=NODE (repeatable)")
	f.DurationVar(&timeout, "timeout", promimport.DefaultCallTimeout, "timeout of one query_range call")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return c
}

func newMetricsScrapeCmd(a *app) *cobra.Command {
	var (
		targets           []string
		interval, timeout time.Duration
		maxBody           int64
		once              bool
	)
	c := &cobra.Command{
		Use:   "scrape --target NODE=URL ... [--interval 15s] [--once]",
		Short: "Scrape live /metrics endpoints into ClickHouse until interrupted",
		Long: `scrape polls each --target's /metrics page every --interval and stores the
samples under the target's node name, for clusters whose Prometheus keeps too
little history (or that have none). A target that is down, slow or serves
something else is logged and counted; the others carry on. --once scrapes a
single round and fails if any target failed. Ctrl-C stops it.`,
		Example: `  kvtrail metrics scrape --target prefill-0=http://10.0.1.1:30000/metrics \
    --target decode-0=http://10.0.2.1:30000/metrics --interval 15s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(targets) == 0 {
				return usageError{errors.New("give at least one --target NODE=URL")}
			}
			if interval <= 0 || timeout <= 0 {
				return usageError{errors.New("--interval and --timeout must be positive")}
			}
			sc := &promimport.Scraper{Interval: interval, Timeout: timeout, MaxBodyBytes: maxBody, Logger: a.log}
			for _, t := range targets {
				tg, err := promimport.ParseTarget(t)
				if err != nil {
					return usageError{err}
				}
				sc.Targets = append(sc.Targets, tg)
			}
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			counters := &promimport.Counters{}
			sc.Store, sc.Hooks = s, counters
			if once {
				res, err := sc.ScrapeOnce(cmd.Context())
				printScrapeResults(cmd.OutOrStdout(), res)
				if err != nil {
					return err
				}
				failed := 0
				for _, r := range res {
					if r.Err != nil {
						failed++
					}
				}
				if failed > 0 {
					return fmt.Errorf("%d of %d targets failed", failed, len(res))
				}
				return nil
			}
			a.log.Info("scraping", slog.Int("targets", len(sc.Targets)), slog.Duration("interval", interval))
			err = sc.Run(cmd.Context())
			printScrapeTotals(cmd.OutOrStdout(), sc.Targets, counters)
			return err
		},
	}
	f := c.Flags()
	f.StringArrayVar(&targets, "target", nil, "NODE=URL of a /metrics endpoint (repeatable)")
	f.DurationVar(&interval, "interval", promimport.DefaultInterval, "time between scrape rounds")
	f.DurationVar(&timeout, "timeout", promimport.DefaultScrapeTimeout, "timeout of one scrape (capped at --interval)")
	f.Int64Var(&maxBody, "max-body-bytes", promimport.DefaultMaxBodyBytes, "largest /metrics page accepted")
	f.BoolVar(&once, "once", false, "scrape one round and exit")
	return c
}

func printScrapeResults(w io.Writer, res []promimport.ScrapeResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSAMPLES\tMALFORMED\tTOOK\tERROR")
	for _, r := range res {
		msg := ""
		if r.Err != nil {
			msg = r.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.Target.Node, r.Samples, r.Malformed, r.Duration.Round(time.Millisecond), msg)
	}
	_ = tw.Flush()
}

func printScrapeTotals(w io.Writer, targets []promimport.Target, c *promimport.Counters) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSCRAPES\tFAILED\tSAMPLES\tMALFORMED\tLAST ERROR")
	seen := map[string]bool{}
	for _, t := range targets {
		if seen[t.Node] {
			continue
		}
		seen[t.Node] = true
		n := c.Node(t.Node)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", t.Node, n.Scrapes, n.Failures, n.Samples, n.Malformed, n.LastErr)
	}
	_ = tw.Flush()
	rows, fails := c.Written()
	fmt.Fprintf(w, "%d samples written, %d failed writes\n", rows, fails)
}

func init() { extraCommands = append(extraCommands, newMetricsCmd) }
