package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/bench"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/simulate"
)

func init() { benchCommands = append(benchCommands, newBenchIncidentCmd) }

func newBenchIncidentCmd(a *app) *cobra.Command {
	var scenario, dir, database string
	var scale float64
	var pageSize int
	var keep, noAdopt, twoCommands, simulated bool
	c := &cobra.Command{
		Use:   "incident",
		Short: "An incident from simulation to the notification list: time and peak RSS per phase, disk, and the list against the truth",
		Long: `bench incident simulates an incident of --scale (1 is about 100,000 requests;
--scale 100 about 10 million) to disk, ingests it into a fresh database and
analyzes the ingested span as kvtrail ingest --analyze does (the analysis
links the requests into request_facts), reads the notification list and
compares it with the simulator's truth. With --two-commands it measures
kvtrail ingest then kvtrail analyze instead: the link after the lines is a
phase of its own, and the analysis links every request again.
It prints each phase's time and this process's peak RSS during it, the
time from the first line to the list, ClickHouse's bytes on disk, and how
the received and exposed lists agree with the truth. With --database (and --dir, where that incident
was simulated to) it analyzes an incident already ingested there, such as
one kept with --keep, and drops nothing. With --simulated it ingests and
analyzes the logs an earlier run kept in --dir instead of simulating again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scale <= 0 {
				return usageError{fmt.Errorf("--scale must be positive, got %g", scale)}
			}
			if err := checkPageSize(pageSize); err != nil {
				return err
			}
			if database != "" && pageSize != 0 {
				return usageError{fmt.Errorf("--page-size sets the simulation's engines; with --database nothing is simulated")}
			}
			if simulated {
				switch {
				case dir == "":
					return usageError{fmt.Errorf("--simulated needs --dir, the directory an earlier run simulated to")}
				case database != "":
					return usageError{fmt.Errorf("--simulated ingests again; --database analyzes what is already ingested: give one")}
				case cmd.Flags().Changed("scale") || cmd.Flags().Changed("page-size") || cmd.Flags().Changed("scenario"):
					return usageError{fmt.Errorf("--scale, --page-size and --scenario set a simulation; with --simulated nothing is simulated")}
				}
			}
			if database != "" && dir == "" {
				return usageError{fmt.Errorf("--database needs --dir, the directory the incident was simulated to (its truth.json)")}
			}
			ctx := cmd.Context()
			var (
				s       *chstore.Store
				closeFn func()
				err     error
			)
			if database != "" {
				a.cfg.ClickHouse.Database = database
				s, closeFn, err = a.openMigrated(ctx)
			} else {
				s, closeFn, err = a.benchStore(ctx, keep)
			}
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := bench.Incident(ctx, s, bench.IncidentOptions{Scenario: scenario, Scale: scale, PageSize: pageSize, Dir: dir, Ingested: database != "", Simulated: simulated,
				Ingest: ingest.Options{Logger: a.log}, Cfg: a.analyzeConfig(), AnalyzeMemoryLimit: analyzeMemoryLimit(a.cfg.Analyze.MemoryLimitMB),
				IngestMemoryLimit: a.memoryLimit(), NoAdopt: noAdopt, TwoCommands: twoCommands})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case database != "":
				fmt.Fprintf(w, "incident %s in %s: %d requests (ingested before)\n\n", dir, database, res.Requests)
			case simulated:
				fmt.Fprintf(w, "incident %s (simulated before): %d requests, %d records\n\n", dir, res.Requests, res.Lines)
			default:
				fmt.Fprintf(w, "incident %s at scale %g%s: %d requests, %d records\n\n", scenario, scale, pageSizeNote(pageSize), res.Requests, res.Lines)
			}
			tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "PHASE\tTIME\tPEAK RSS\tPEAK LIVE HEAP")
			var total float64
			for _, p := range res.Phases {
				total += p.Duration.Seconds()
				fmt.Fprintf(tw, "%s\t%.1fs\t%.0f MB\t%.0f MB\n", p.Name, p.Duration.Seconds(), float64(p.PeakRSS)/1e6, float64(p.PeakLive)/1e6)
				if p.Name == "analyze" {
					for _, st := range res.AnalyzeSteps {
						fmt.Fprintf(tw, "  %s\t%.1fs\t\n", st.Name, st.Duration.Seconds())
					}
				}
			}
			fmt.Fprintf(tw, "total\t%.1fs\t\n", total)
			if line := linePhases(res.Phases); len(line) > 0 {
				var d time.Duration
				for _, p := range line {
					d += p.Duration
				}
				fmt.Fprintf(tw, "first line to list\t%.1fs\t(%s)\n", d.Seconds(), phaseNames(line))
			}
			_ = tw.Flush()
			if res.Adopted > 0 {
				fmt.Fprintf(w, "\nthe analysis took the link's rows of %d requests as its own\n", res.Adopted)
			} else if res.Linked > 0 {
				fmt.Fprintf(w, "\nthe analysis linked and saved %d requests\n", res.Linked)
			}
			fmt.Fprintf(w, "allocator replays over the window: %d\n", res.ReplayPasses)
			fmt.Fprintf(w, "\nClickHouse bytes on disk: %.1f MB\n", float64(res.DiskBytes)/1e6)
			fmt.Fprintf(w, "received foreign data: %d listed, %d true, %d missed, %d extra (exact: %v)\n",
				res.Received.Listed, res.ReceivedTruth, res.Received.Missed, res.Received.Extra, res.Received.Exact())
			fmt.Fprintf(w, "possibly exposed:      %d listed, %d true, recall %.3f, precision %.3f\n",
				res.Exposed.Listed, res.ExposedTruth, res.Exposed.Recall(), res.Exposed.Precision())
			return nil
		},
	}
	c.Flags().StringVar(&scenario, "scenario", "incident-2026", "simulator scenario")
	c.Flags().Float64Var(&scale, "scale", 1, "traffic multiplier (1 ≈ 100k requests)")
	pageSizeFlag(c, &pageSize)
	c.Flags().StringVar(&dir, "dir", "", "keep the simulated logs in this directory (default: a temporary one, removed)")
	c.Flags().BoolVar(&keep, "keep", false, "keep the benchmark database")
	c.Flags().BoolVar(&twoCommands, "two-commands", false, "measure kvtrail ingest then kvtrail analyze (a link after the lines, then an analysis of all data) instead of kvtrail ingest --analyze")
	c.Flags().BoolVar(&noAdopt, "no-adopt", false, "the analysis saves every request it links, even those the link saved (the comparison)")
	c.Flags().BoolVar(&simulated, "simulated", false, "ingest and analyze the logs an earlier run simulated to --dir, without simulating again")
	c.Flags().StringVar(&database, "database", "", "analyze the incident already ingested in this database (with --dir: its simulation); nothing is simulated, ingested or dropped")
	return c
}

// phaseNames lists the phases' names, the notification list as "list".
func phaseNames(phases []bench.Phase) string {
	names := make([]string, len(phases))
	for i, p := range phases {
		names[i] = strings.TrimPrefix(p.Name, "notification ")
	}
	return strings.Join(names, ", ")
}

// linePhases is the phases from the first line to the list: from the
// ingest on (none when nothing was ingested).
func linePhases(phases []bench.Phase) []bench.Phase {
	for i, p := range phases {
		if p.Name == "ingest" {
			return phases[i:]
		}
	}
	return nil
}

// pageSizeFlag is the benches' --page-size.
func pageSizeFlag(c *cobra.Command, ps *int) {
	c.Flags().IntVar(ps, "page-size", 0, "every simulated engine's page_size in tokens (default 64, the simulator's; 1 is SGLang's default)")
}

// checkPageSize refuses, as a usage error, a page size the simulator
// cannot run engines with.
func checkPageSize(ps int) error {
	if !simulate.PageSizeOK(ps) {
		return usageError{fmt.Errorf("--page-size must be 1 to %d tokens, got %d", simulate.MaxPageSize, ps)}
	}
	return nil
}

// pageSizeNote names a page size set on the command line.
func pageSizeNote(ps int) string {
	if ps == 0 {
		return ""
	}
	return fmt.Sprintf(", page size %d", ps)
}
