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
	"github.com/kvtrail/kvtrail/internal/workclaim"
)

// ingestFlags are the flags of `kvtrail ingest`.
type ingestFlags struct {
	manifest, format, node, role, tz, offset string
	endpoints                                []string
	year                                     int
	asJSON, force, correlate                 bool
	// analyze: the link after the lines is an analysis of the span.
	analyze bool
	// worker, when set, makes this process one ingest worker among
	// several given the same sources (docs/cluster.md).
	worker        string
	lease, settle time.Duration
}

func newIngestCmd(a *app) *cobra.Command {
	var fl ingestFlags
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
			sources, err := fl.sources(args)
			if err != nil {
				return err
			}
			if err := fl.checkWorker(sources); err != nil {
				return err
			}
			if fl.analyze && !fl.correlate {
				return usageError{errors.New("--analyze links the requests as it analyzes them; it cannot go with --correlate=false")}
			}
			return runIngest(cmd, a, fl, sources)
		},
	}
	f := c.Flags()
	f.StringVar(&fl.manifest, "manifest", "", "sources manifest (YAML, see docs/formats.md)")
	f.StringVar(&fl.format, "format", "auto", fmt.Sprintf("format of every PATH: auto or one of %v", parse.Formats))
	f.StringVar(&fl.node, "node", "", "node name of every PATH (must match how gateway logs name it)")
	f.StringVar(&fl.role, "role", "", "role of every PATH: prefill, decode, gateway, unified, mooncake, metrics")
	f.StringSliceVar(&fl.endpoints, "endpoint", nil, "addresses this node is known by (repeatable)")
	f.StringVar(&fl.tz, "timezone", "UTC", "time zone of zone-less timestamps")
	f.StringVar(&fl.offset, "clock-offset", "", "duration added to every timestamp to undo clock skew, e.g. -1.5s")
	f.IntVar(&fl.year, "year", 0, "year for glog short dates (default: inferred)")
	f.BoolVar(&fl.asJSON, "json", false, "print the summary as JSON")
	f.BoolVar(&fl.force, "force", false, "re-ingest sources already recorded as complete")
	f.BoolVar(&fl.correlate, "correlate", true, "afterwards, link the ingested time span's requests across nodes into request_facts")
	f.BoolVar(&fl.analyze, "analyze", false, "afterwards, analyze the ingested time span (as kvtrail analyze over it), which links its requests as it goes instead of linking them first")
	f.StringVar(&fl.worker, "worker", "", "run as the ingest worker NAME: processes (maybe on other machines) given the same sources split them through ClickHouse; NAME must be unique among them")
	f.DurationVar(&fl.lease, "lease", workclaim.DefaultLease, "with --worker: how long a source's claim holds without renewal; a crashed worker's sources are taken over after it")
	f.DurationVar(&fl.settle, "claim-settle", workclaim.DefaultSettle, "with --worker: wait between claiming a source and confirming the claim (more than twice the clock skew between the workers' machines)")
	_ = f.MarkHidden("claim-settle")
	return c
}

// sources are what to ingest: the manifest's, or every file of args with
// the flags' node, role and format. Bad flags are usage errors.
func (fl ingestFlags) sources(args []string) ([]ingest.Source, error) {
	switch {
	case fl.manifest != "" && len(args) > 0:
		return nil, usageError{errors.New("give either --manifest or paths, not both")}
	case fl.manifest != "":
		sources, err := ingest.LoadManifest(fl.manifest)
		if err != nil {
			return nil, usageError{err}
		}
		return sources, nil
	case len(args) == 0:
		return nil, usageError{errors.New("nothing to ingest: give --manifest FILE or PATH arguments (- for stdin)")}
	}
	loc := time.UTC
	if fl.tz != "" {
		var err error
		if loc, err = time.LoadLocation(fl.tz); err != nil {
			return nil, usageError{fmt.Errorf("--timezone: %w", err)}
		}
	}
	var off time.Duration
	if fl.offset != "" {
		var err error
		if off, err = time.ParseDuration(fl.offset); err != nil {
			return nil, usageError{fmt.Errorf("--clock-offset: %w", err)}
		}
	}
	var sources []ingest.Source
	for _, arg := range args {
		files, err := ingest.Expand(arg)
		if err != nil {
			return nil, usageError{err}
		}
		for _, f := range files {
			s := ingest.Source{Path: f, Format: ingest.NormalizeFormat(fl.format), Node: fl.node, Role: fl.role,
				Endpoints: fl.endpoints, Location: loc, ClockOffset: off, Year: fl.year}
			if err := s.Validate(); err != nil {
				return nil, usageError{err}
			}
			sources = append(sources, s)
		}
	}
	return sources, nil
}

// checkWorker refuses what --worker cannot share: stdin (no other process
// can read it) and --force (the claims of the earlier run say done).
func (fl ingestFlags) checkWorker(sources []ingest.Source) error {
	if fl.worker == "" {
		return nil
	}
	if fl.force {
		return usageError{errors.New("--force cannot be combined with --worker: re-ingest with one process")}
	}
	if fl.lease <= 0 || fl.settle <= 0 {
		return usageError{errors.New("--lease and --claim-settle must be positive")}
	}
	for _, s := range sources {
		if s.Path == "-" {
			return usageError{errors.New("--worker cannot ingest stdin (-): the workers must all be able to read every source")}
		}
	}
	return nil
}

// correlationShare is what ingest workers share to link requests once.
type correlationShare struct {
	co  *workclaim.Coordinator
	job string
}

// workerClaims adapts a workclaim.Coordinator to ingest.Claims.
type workerClaims struct{ c *workclaim.Coordinator }

func (w workerClaims) Claim(ctx context.Context, job, unit string) (ingest.ClaimHeld, error) {
	h, err := w.c.Claim(ctx, job, unit)
	if h == nil {
		return nil, err // not a typed nil in the interface
	}
	return heldClaim{h}, err
}

func (w workerClaims) Remaining(ctx context.Context, job string, units []string) ([]string, error) {
	return w.c.Remaining(ctx, job, units)
}

func (w workerClaims) Lease() time.Duration {
	if w.c.Lease <= 0 {
		return workclaim.DefaultLease
	}
	return w.c.Lease
}

func (w workerClaims) Worker() string { return w.c.Worker }

type heldClaim struct{ *workclaim.Held }

func (h heldClaim) Renew(ctx context.Context) error {
	err := h.Held.Renew(ctx)
	if errors.Is(err, workclaim.ErrLost) {
		return fmt.Errorf("%w: %w", ingest.ErrClaimLost, err)
	}
	return err
}

// runIngest ingests sources into the configured database, links the
// ingested span's requests (unless --correlate=false) and prints the
// summary. An ingest error still prints what was done.
func runIngest(cmd *cobra.Command, a *app, fl ingestFlags, sources []ingest.Source) error {
	stopGoverning := a.governMemory()
	defer func() { stopGoverning() }()
	s, closeFn, err := a.openMigrated(cmd.Context())
	if err != nil {
		return err
	}
	defer closeFn()
	opts := ingest.Options{Force: fl.force, Logger: a.log}
	var share *correlationShare
	if fl.worker != "" {
		co := &workclaim.Coordinator{Store: s, Worker: fl.worker, Lease: fl.lease, Settle: fl.settle}
		defer warnWithdrawn(a.log, co, fl.settle)
		opts.Claims = workerClaims{co}
		share = &correlationShare{co: co, job: ingest.ClaimJob(sources)}
		a.log.Info("ingest worker", "worker", fl.worker, "job", share.job, "lease", fl.lease.String())
	}
	if !fl.asJSON && term.IsTerminal(int(os.Stderr.Fd())) {
		opts.Progress = &barProgress{}
	}
	sum, ingestErr := ingest.New(s, opts).Ingest(cmd.Context(), sources)
	stopGoverning()
	stopGoverning = func() {}
	var linked *correlation
	var rep *analyze.Report
	if fl.correlate {
		// Linking is the analysis's code on the analysis's slices, so it
		// runs under the analysis's memory limit, not the line stream's:
		// it holds a slice of requests and their engine lines. In slices
		// sized for memory_limit (8,000 requests) the server read each
		// engine line up to three times (the slices' link margins), and
		// larger slices under that limit had the collector run without
		// pause: at scale 20, 35-37 s against 20-21 s now, peak RSS 225
		// against 563-577 MB (docs/performance.md, "Request linking").
		stopLinking := setMemoryLimit(a.cfg.Analyze.MemoryLimitMB, a.log)
		var err error
		linked, rep, err = correlateIngested(cmd.Context(), a, s, share, fl.analyze)
		stopLinking()
		if err != nil {
			ingestErr = errors.Join(ingestErr, err)
		}
		if rep != nil && rep.Errors() {
			ingestErr = errors.Join(ingestErr, errors.New("one or more analyzers failed (see ERROR above)"))
		}
	}
	if err := printIngest(cmd.OutOrStdout(), fl.asJSON, sum, linked, rep); err != nil {
		return err
	}
	if fl.analyze && rep == nil && ingestErr == nil && !fl.asJSON {
		fmt.Fprintln(cmd.OutOrStdout(), "nothing analyzed: no ingested span was left to link (already linked, or by another ingest worker); kvtrail analyze analyzes what is stored")
	}
	return ingestErr
}

// printIngest prints the summary, the correlation and the analysis (with
// --analyze), as JSON or text.
func printIngest(w io.Writer, asJSON bool, sum ingest.Summary, linked *correlation, rep *analyze.Report) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			ingest.Summary
			Correlation *correlation `json:"request_facts,omitempty"`
			Analysis    *reportJSON  `json:"analysis,omitempty"`
		}{sum, linked, newReportJSON(rep)})
	}
	printSummary(w, sum)
	if linked != nil {
		fmt.Fprintf(w, "linked %d requests (gateway → prefill → decode) into request_facts for %s in %.1fs\n",
			linked.Requests, linked.Window, linked.Seconds)
	}
	if rep != nil {
		fmt.Fprintln(w)
		printReport(w, rep)
	}
	return nil
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
//
// Ingest workers (share not nil) all finish with the same pending span;
// one of them links it, the one that claims it (the span's watermark is
// the unit), and the others wait until it is recorded: linking it twice
// would cost time, not correctness. If that worker dies, its claim runs
// out and a waiting worker links the span.
func correlateIngested(ctx context.Context, a *app, s *chstore.Store, share *correlationShare, analyzeToo bool) (_ *correlation, _ *analyze.Report, err error) {
	sp, ok, err := ingest.PendingCorrelation(ctx, s)
	if err != nil || !ok {
		return nil, nil, err
	}
	if share != nil {
		var h *workclaim.Held
		// Not claimed: another worker links the span, or this worker's
		// claim was withdrawn (acknowledged too late). Wait until the span
		// is linked (nothing pending any more) or the claim can be had
		// (the other worker's lease ran out, or it released the span).
		for {
			var cerr error
			if h, cerr = share.co.Claim(ctx, share.job, fmt.Sprintf("correlate/%d", sp.Watermark)); cerr != nil {
				return nil, nil, fmt.Errorf("claim request linking: %w", cerr)
			}
			if h != nil {
				break
			}
			a.log.Info("waiting for another ingest worker to link the span", "watermark", sp.Watermark)
			// Whether the span is linked is asked often (one small read);
			// the claim, which costs a settle window, only once per poll.
			// Waiting the whole poll left this worker idle for up to 2 s
			// after a link of half a second.
			if err := ingest.WaitOthers(ctx, min(max(share.co.Lease/4, 100*time.Millisecond), 2*time.Second),
				func(ctx context.Context) (bool, error) {
					sp, ok, err = ingest.PendingCorrelation(ctx, s)
					return !ok, err
				}); err != nil {
				return nil, nil, err
			}
			if !ok {
				return nil, nil, nil // linked (or analyzed) by the other worker
			}
		}
		// Renewed while it runs (a big span takes longer than a lease);
		// done once the step is recorded, released if it failed, so that
		// a later ingest links the span still pending.
		stop := make(chan struct{})
		go func() {
			t := time.NewTicker(max(share.co.Lease/3, time.Second))
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					_ = h.Renew(ctx)
				}
			}
		}()
		defer func() {
			close(stop)
			end := h.Release
			if err == nil {
				end = h.Done
			}
			_ = end(context.WithoutCancel(ctx))
		}()
	}
	t0 := time.Now()
	cfg := a.analyzeConfig()
	a.log.Info("linking requests into request_facts", "from", sp.From, "to", sp.To)
	r := &analyze.Runner{DB: s, Cfg: cfg, Trigger: "ingest", Log: a.log}
	var l ingest.Linker = r
	var an *analyze.SpanAnalysis
	if analyzeToo {
		r.Analyzers, r.Lean = analyze.All(cfg), true
		an = &analyze.SpanAnalysis{Runner: r}
		l = an
	}
	w, n, err := ingest.LinkSpan(ctx, s, l, sp, cfg.LinkMargin)
	if an != nil && an.Report != nil {
		return &correlation{Window: w.String(), Requests: n, Seconds: time.Since(t0).Seconds()}, an.Report, err
	}
	if err != nil {
		return nil, nil, err
	}
	return &correlation{Window: w.String(), Requests: n, Seconds: time.Since(t0).Seconds()}, nil, nil
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
