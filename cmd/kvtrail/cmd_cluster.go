package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/chstore"
)

// printHostStatus adds, in cluster mode, one line per host to
// `kvtrail migrate status`: reachable or not, the migrations its replica of
// schema_migrations records, tables missing there, and replication health.
func printHostStatus(ctx context.Context, out io.Writer, m *chstore.Migrator) error {
	hosts, err := m.HostStatus(ctx)
	if err != nil || len(hosts) == 0 {
		return err
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tREPLICA\tHOST\tSTATE\tAPPLIED\tMISSING TABLES\tREADONLY\tREPL QUEUE")
	for _, h := range hosts {
		if h.Err != nil {
			fmt.Fprintf(w, "%d\t%d\t%s\tunreachable: %s\t\t\t\t\n", h.Shard, h.Replica, h.Addr(), oneLine(h.Err.Error()))
			continue
		}
		var applied []string
		for _, v := range h.Applied {
			applied = append(applied, fmt.Sprintf("%04d", v))
		}
		state := "ok"
		if len(h.Missing) > 0 || h.ReadOnly > 0 {
			state = "DEGRADED"
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", h.Shard, h.Replica, h.Addr(), state,
			strings.Join(applied, ","), strings.Join(h.Missing, ","), h.ReadOnly, h.Queue)
	}
	return w.Flush()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func newRetentionCmd(a *app) *cobra.Command {
	var dryRun bool
	var keep time.Duration
	c := &cobra.Command{
		Use:   "retention",
		Short: "Expire ingested data older than retention.keep (never a partition under legal hold)",
		Long: `retention expires ingested log data (raw lines, typed events, metrics,
request facts) older than retention.keep. On ClickHouse 18.16, which has no
TTL, it drops whole expired week/month partitions, skipping any that overlaps
a case under legal hold (ON CLUSTER in cluster mode). On servers with TTL it
sets each table's TTL, with the held windows as exceptions. kvtrail serve
runs it every 6 hours when retention.keep is set; run it from cron otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keep == 0 {
				keep = a.cfg.Retention.Keep
			}
			if keep <= 0 {
				return usageError{fmt.Errorf("retention.keep is 0 (keep everything); set it or pass --keep")}
			}
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := s.ApplyRetention(cmd.Context(), keep, time.Now(), dryRun)
			if res == nil {
				return err
			}
			out := cmd.OutOrStdout()
			verb := "dropped"
			if dryRun {
				verb = "would drop"
			}
			for _, p := range res.Dropped {
				fmt.Fprintf(out, "%s %s partition %s (%s to %s, %d rows)\n", verb, p.Table, p.ID, p.From.Format(time.DateOnly), p.To.Format(time.DateOnly), p.Rows)
			}
			for _, p := range res.Held {
				fmt.Fprintf(out, "kept %s partition %s: overlaps a case under legal hold\n", p.Table, p.ID)
			}
			for _, q := range res.TTL {
				fmt.Fprintln(out, q)
			}
			fmt.Fprintf(out, "cutoff %s: %d partitions %s, %d held\n", res.Cutoff.Format(time.RFC3339), len(res.Dropped), verb, len(res.Held))
			return err
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be dropped, change nothing")
	c.Flags().DurationVar(&keep, "keep", 0, "override retention.keep for this run")
	return c
}

func init() { extraCommands = append(extraCommands, newRetentionCmd) }
