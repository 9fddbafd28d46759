package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/parse"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

func newIngestCmd(a *app) *cobra.Command {
	var (
		manifest, format, node, role, tz, offset string
		endpoints                                []string
		year                                     int
		asJSON, force, correlate                 bool
	)
	c := &cobra.Command{
		Use:   "ingest [--manifest sources.yaml | --node N --role R [--format F] PATH...]",
		Short: "Ingest log and metric files (files, directories, .gz, - for stdin) into ClickHouse",
		Long: `ingest reads SGLang engine logs (text and JSON request logs), request-metrics
files, Mooncake glog, gateway response logs, sgl-model-gateway logs,
Prometheus text files and page-event logs. Every line is stored as evidence
(raw_lines), parsed or not; what is understood goes to the typed tables.

Ingest is idempotent (a source already ingested is skipped; its rows have
stable keys) and resumable (rerun after a crash continues from the last
committed batch). Sources come from a manifest (docs/formats.md) or from
flags that apply to every PATH.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var sources []ingest.Source
			switch {
			case manifest != "" && len(args) > 0:
				return usageError{errors.New("give either --manifest or paths, not both")}
			case manifest != "":
				var err error
				if sources, err = ingest.LoadManifest(manifest); err != nil {
					return usageError{err}
				}
			case len(args) == 0:
				return usageError{errors.New("nothing to ingest: give --manifest FILE or PATH arguments (- for stdin)")}
			default:
				loc := time.UTC
				if tz != "" {
					var err error
					if loc, err = time.LoadLocation(tz); err != nil {
						return usageError{fmt.Errorf("--timezone: %w", err)}
					}
				}
				var off time.Duration
				if offset != "" {
					var err error
					if off, err = time.ParseDuration(offset); err != nil {
						return usageError{fmt.Errorf("--clock-offset: %w", err)}
					}
				}
				for _, arg := range args {
					files, err := ingest.Expand(arg)
					if err != nil {
						return usageError{err}
					}
					for _, f := range files {
						s := ingest.Source{Path: f, Format: ingest.NormalizeFormat(format), Node: node, Role: role,
							Endpoints: endpoints, Location: loc, ClockOffset: off, Year: year}
						if err := s.Validate(); err != nil {
							return usageError{err}
						}
						sources = append(sources, s)
					}
				}
			}
			a.limitMemory()
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			opts := ingest.Options{Force: force, Logger: a.log}
			if !asJSON && term.IsTerminal(int(os.Stderr.Fd())) {
				opts.Progress = &barProgress{}
			}
			sum, ingestErr := ingest.New(s, opts).Ingest(cmd.Context(), sources)
			var linked *correlation
			if correlate {
				var err error
				if linked, err = correlateIngested(cmd.Context(), a, s); err != nil {
					ingestErr = errors.Join(ingestErr, err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					ingest.Summary
					Correlation *correlation `json:"request_facts,omitempty"`
				}{sum, linked}); err != nil {
					return err
				}
			} else {
				printSummary(cmd.OutOrStdout(), sum)
				if linked != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "linked %d requests (gateway → prefill → decode) into request_facts for %s in %.1fs\n",
						linked.Requests, linked.Window, linked.Seconds)
				}
			}
			return ingestErr
		},
	}
	f := c.Flags()
	f.StringVar(&manifest, "manifest", "", "sources manifest (YAML, see docs/formats.md)")
	f.StringVar(&format, "format", "auto", fmt.Sprintf("format of every PATH: auto or one of %v", parse.Formats))
	f.StringVar(&node, "node", "", "node name of every PATH (must match how gateway logs name it)")
	f.StringVar(&role, "role", "", "role of every PATH: prefill, decode, gateway, unified, mooncake, metrics")
	f.StringSliceVar(&endpoints, "endpoint", nil, "addresses this node is known by (repeatable)")
	f.StringVar(&tz, "timezone", "UTC", "time zone of zone-less timestamps")
	f.StringVar(&offset, "clock-offset", "", "duration added to every timestamp to undo clock skew, e.g. -1.5s")
	f.IntVar(&year, "year", 0, "year for glog short dates (default: inferred)")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	f.BoolVar(&force, "force", false, "re-ingest sources already recorded as complete")
	f.BoolVar(&correlate, "correlate", true, "afterwards, link the ingested time span's requests across nodes into request_facts")
	return c
}

// correlation is what the linking step after an ingest did.
type correlation struct {
	Window   string  `json:"window"`
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
}

// correlateIngested links the requests of the time span ingested since the
// last correlation into request_facts, so request_facts follows a request
// across nodes without an analyze run. It is a checkpointed step of its own
// (ingest_steps): a run killed before or during it leaves the span pending
// and the next ingest, even one that finds every source already complete,
// finishes it. Linking a span again writes the same facts with a newer
// version, which replaces the older rows.
func correlateIngested(ctx context.Context, a *app, s *chstore.Store) (*correlation, error) {
	sp, ok, err := ingest.PendingCorrelation(ctx, s)
	if err != nil || !ok {
		return nil, err
	}
	t0 := time.Now()
	cfg := a.analyzeConfig()
	w := analyze.Window{From: sp.From, To: sp.To}
	// Requests already in whose other side just arrived (a gateway line a
	// little before the new engine lines) are within one link margin of
	// the span.
	if m := cfg.LinkMargin; m > 0 {
		w.From, w.To = w.From.Add(-m), w.To.Add(m)
	}
	a.log.Info("linking requests into request_facts", "window", w.String())
	r := &analyze.Runner{DB: s, Cfg: cfg, Trigger: "ingest", Log: a.log}
	n, err := r.Correlate(ctx, w, time.Hour)
	if err != nil {
		return nil, fmt.Errorf("link requests (request_facts): %w", err)
	}
	if err := ingest.MarkCorrelated(ctx, s, sp, n); err != nil {
		return nil, fmt.Errorf("link requests (request_facts): %w", err)
	}
	return &correlation{Window: w.String(), Requests: n, Seconds: time.Since(t0).Seconds()}, nil
}

func printSummary(w io.Writer, sum ingest.Summary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tNODE\tFORMAT\tSTATE\tRECORDS\tPARSED\tNOISE\tUNKNOWN\tMALFORMED")
	for _, s := range sum.Sources {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", s.Path, s.Node, s.Format, s.State, s.Records, s.Parsed, s.Noise, s.Unknown, s.Malformed)
	}
	fmt.Fprintln(tw, "\nFORMAT\t\t\t\tRECORDS\tPARSED\tNOISE\tUNKNOWN\tMALFORMED")
	formats := make([]string, 0, len(sum.ByFormat))
	for f := range sum.ByFormat {
		formats = append(formats, f)
	}
	sort.Strings(formats)
	for _, f := range formats {
		c := sum.ByFormat[f]
		fmt.Fprintf(tw, "%s\t\t\t\t%d\t%d\t%d\t%d\t%d\n", f, c.Records, c.Parsed, c.Noise, c.Unknown, c.Malformed)
	}
	_ = tw.Flush()
	rate := 0.0
	if sum.Seconds > 0 {
		rate = float64(sum.Total.Records) / sum.Seconds
	}
	fmt.Fprintf(w, "\n%d records (%d parsed, %d noise, %d unknown, %d malformed) in %.1fs, %.0f records/s\n",
		sum.Total.Records, sum.Total.Parsed, sum.Total.Noise, sum.Total.Unknown, sum.Total.Malformed, sum.Seconds, rate)
	for _, s := range sum.Sources {
		if s.Warning != "" {
			fmt.Fprintf(w, "WARNING %s: %s (see `kvtrail formats check`)\n", s.Path, s.Warning)
		}
	}
	for _, s := range sum.Sources {
		switch {
		case s.State == "partial":
			fmt.Fprintf(w, "PARTIAL %s (records up to the damage kept): %s\n", s.Path, s.Error)
		case s.Error != "":
			fmt.Fprintf(w, "FAILED %s: %s\n", s.Path, s.Error)
		}
	}
}

// barProgress shows bytes, records/s and ETA on a terminal. Workers call
// Add concurrently.
type barProgress struct {
	mu      sync.Mutex
	bar     *progressbar.ProgressBar
	records int64
	start   time.Time
}

func (p *barProgress) Start(size int64) {
	p.records, p.start = 0, time.Now()
	p.bar = progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("ingest"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

func (p *barProgress) Add(bytes, records int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records += records
	_ = p.bar.Add64(bytes)
	if el := time.Since(p.start).Seconds(); el > 0 {
		p.bar.Describe(fmt.Sprintf("%.0f lines/s", float64(p.records)/el))
	}
}

func (p *barProgress) Finish() { _ = p.bar.Finish() }

func init() { extraCommands = append(extraCommands, newIngestCmd) }
