package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/memlimit"
	"github.com/kvtrail/kvtrail/internal/workclaim"
)

func init() {
	extraCommands = append(extraCommands, newAnalyzeCmd, newFindingsCmd, newAffectedCmd)
}

// analyzeConfig maps the config section onto the analyzer parameters.
func (a *app) analyzeConfig() analyze.Config {
	c := a.cfg.Analyze
	return analyze.Config{
		LinkMargin: c.LinkMargin, SpeedMinUncached: c.SpeedMinUncachedTokens, SpeedMADs: c.SpeedMADs,
		SpeedMaxRatio: c.SpeedMaxRatio, SpeedSample: c.SpeedSample, SpeedMinSamples: c.SpeedMinSamples,
		AbortReuseWindow: c.AbortReuseWindow, DeferredRelease: c.DeferredRelease, GapThreshold: c.GapThreshold,
		SliceRequests: c.SliceRequests, ReplayWorkers: c.ReplayWorkers,
	}
}

// setMemoryLimit sets the process' soft memory limit to mb MiB (none for
// 0), unless GOMEMLIMIT set one, and returns what ends it. Without a limit
// the heap may grow to twice what is live between collections and the
// runtime returns freed memory lazily: an analysis whose live heap is 330
// MB peaked at 0.9-1.2 GB RSS. The limit follows the live heap once that
// comes near it (internal/memlimit): a fixed limit below the live heap,
// as at scale 100, had the collector run without pause.
func setMemoryLimit(mb int, log *slog.Logger) (stop func()) {
	lim := analyzeMemoryLimit(mb)
	if lim <= 0 {
		return func() {}
	}
	g := memlimit.Start(lim)
	return func() {
		g.Stop()
		if peak, live, other := g.Peak(); peak > lim {
			log.Info("the live heap passed analyze.memory_limit_mb; the soft limit followed it",
				"memory_limit_mb", mb, "live_heap_mb", live>>20, "runtime_other_mb", other>>20, "peak_limit_mb", peak>>20)
		}
	}
}

// analyzeMemoryLimit is the limit in bytes analysis runs under: mb MiB,
// or none (0) for mb 0 or when GOMEMLIMIT is set (the runtime applied it).
func analyzeMemoryLimit(mb int) int64 { return softLimit(int64(mb) << 20) }

func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, usageError{fmt.Errorf("--%s: %q is not a time (RFC 3339, \"2006-01-02 15:04:05\" UTC or a date)", flag, v)}
}

func newAnalyzeCmd(a *app) *cobra.Command {
	var (
		from, to, manifest string
		names              []string
		wf                 analyzeWorkerFlags
	)
	c := &cobra.Command{
		Use:   "analyze [--from T --to T] [--analyzer NAME...] [--new-job | --worker NAME --job ID]",
		Short: "Run analyzers over a window, record runs and findings, rebuild the affected-customer list",
		Long: `analyze links every client request across gateway, prefill, transfer and decode
(request_facts), runs the analyzers (docs/analyzers.md) over requests that
started in [--from, --to) (default: all data), records each run and its
findings, and rebuilds the affected-customer list from the latest runs.

A window of more than analyze.slice_requests requests is read in slices, so
memory stays bounded. Several processes, on any machines that reach the
database, can share one analysis: --new-job prints a job id, and each
"analyze --worker NAME --job ID" (same window) claims slices through
ClickHouse; a worker that dies is taken over after --lease, and one of them
concludes as a single process would (docs/cluster.md).

Analyzers: ` + strings.Join(analyze.Names(), ", ") + `.
It exits non-zero only when something failed, never because of findings.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wf.newJob {
				if wf.worker != "" || wf.job != "" {
					return usageError{errors.New("--new-job names a job; run the workers with --worker and --job")}
				}
				fmt.Fprintln(cmd.OutOrStdout(), analyze.NewJobID(time.Now()))
				return nil
			}
			if (wf.worker == "") != (wf.job == "") {
				return usageError{errors.New("--worker and --job go together (kvtrail analyze --new-job prints a job id)")}
			}
			f, err := parseTime("from", from)
			if err != nil {
				return err
			}
			t, err := parseTime("to", to)
			if err != nil {
				return err
			}
			if _, err := analyze.Select(analyze.All(analyze.DefaultConfig()), names); err != nil {
				return usageError{err}
			}
			var endpoints map[string]string
			if manifest != "" {
				srcs, err := ingest.LoadManifest(manifest)
				if err != nil {
					return usageError{err}
				}
				endpoints = map[string]string{}
				for _, s := range srcs {
					for _, ep := range s.Endpoints {
						endpoints[ep] = s.Node
					}
				}
			}
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			defer setMemoryLimit(a.cfg.Analyze.MemoryLimitMB, a.log)()
			cfg := a.analyzeConfig()
			r := &analyze.Runner{DB: s, Cfg: cfg, Analyzers: analyze.All(cfg), Endpoints: endpoints, Trigger: "cli", Log: a.log, Lean: true}
			if wf.worker != "" {
				return runAnalyzeWorker(cmd.Context(), cmd.OutOrStdout(), r, s, analyze.Window{From: f, To: t}, names, wf)
			}
			rep, err := r.Run(cmd.Context(), analyze.Window{From: f, To: t}, names)
			if rep != nil {
				printReport(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if rep.Errors() {
				return errors.New("one or more analyzers failed (see ERROR above)")
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&from, "from", "", "window start (UTC), inclusive; default: earliest data")
	fl.StringVar(&to, "to", "", "window end (UTC), exclusive; default: latest data")
	fl.StringSliceVar(&names, "analyzer", nil, "run only these analyzers (repeatable)")
	fl.StringVar(&manifest, "manifest", "", "sources manifest whose endpoints name the nodes (optional)")
	fl.BoolVar(&wf.newJob, "new-job", false, "print a new analysis job id for --worker processes to share, and exit")
	fl.StringVar(&wf.worker, "worker", "", "take part in --job as this worker (a name unique among the job's workers)")
	fl.StringVar(&wf.job, "job", "", "with --worker: the job id --new-job printed")
	fl.DurationVar(&wf.lease, "lease", workclaim.DefaultLease, "with --worker: how long a slice's claim holds without renewal; a dead worker's slices are taken over after it")
	fl.DurationVar(&wf.settle, "claim-settle", workclaim.DefaultSettle, "with --worker: wait between claiming a slice and confirming the claim (more than twice the clock skew between the workers' machines)")
	_ = fl.MarkHidden("claim-settle")
	return c
}

func printReport(w io.Writer, rep *analyze.Report) {
	fmt.Fprintf(w, "window %s\n\n", rep.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ANALYZER\tVERSION\tSTATUS\tFINDINGS\tHIGH\tNEW\tTOOK\tRUN")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.Run.Analyzer, r.Run.Version, r.Run.Status, r.Run.Findings,
			r.Run.High, r.NewCount, r.Duration.Round(time.Millisecond), r.Run.ID)
	}
	_ = tw.Flush()
	for _, r := range rep.Runs {
		if r.Run.Status == analyze.StatusError {
			fmt.Fprintf(w, "ERROR %s: %s\n", r.Run.Analyzer, r.Run.Error)
		}
	}
	if rc := rep.Reconstruction; rc != nil {
		n := map[domain.Role]int{}
		for _, row := range rc.Rows {
			n[row.Role]++
		}
		fmt.Fprintf(w, "\naffected list %s: %d tenants received foreign data, %d possibly exposed\n", rc.ID,
			n[analyze.RoleReceived], n[analyze.RoleExposed])
	}
	if rep.Adopted > 0 {
		fmt.Fprintf(w, "\nrequest_facts: took the rows of %d requests an earlier link saved (kvtrail ingest's or an analysis's; same digest)\n", rep.Adopted)
	}
	if rep.Relinked {
		fmt.Fprintln(w, "\nrequest_facts: the newest link's rows differ from this analysis's (another build or endpoint map); saved them again")
	}
	fmt.Fprintln(w, "\ntimings:")
	for _, p := range rep.Phases {
		fmt.Fprintf(w, "  %-32s %s\n", p.Name, p.Duration.Round(time.Millisecond))
	}
}

// reportJSON is an analysis in `kvtrail ingest --analyze --json`: each
// run as the API lists a case's runs (domain.CaseRun), and the affected
// list it rebuilt.
type reportJSON struct {
	Window   string           `json:"window"`
	Runs     []domain.CaseRun `json:"runs"`
	Affected *listJSON        `json:"affected_list,omitempty"`
}

type listJSON struct {
	ID       string `json:"id"`
	Received int    `json:"received_foreign_data"`
	Exposed  int    `json:"possibly_exposed"`
}

func newReportJSON(rep *analyze.Report) *reportJSON {
	if rep == nil {
		return nil
	}
	out := &reportJSON{Window: rep.Window.String(), Runs: []domain.CaseRun{}}
	for _, r := range rep.Runs {
		out.Runs = append(out.Runs, domain.CaseRun{RunID: r.Run.ID, Analyzer: r.Run.Analyzer, Version: r.Run.Version,
			StartedAt: r.Run.Started, FinishedAt: r.Run.Finished, Status: r.Run.Status,
			Findings: uint32(r.Run.Findings), High: uint32(r.Run.High), Error: r.Run.Error})
	}
	if rc := rep.Reconstruction; rc != nil {
		out.Affected = &listJSON{ID: rc.ID}
		for _, row := range rc.Rows {
			switch row.Role {
			case analyze.RoleReceived:
				out.Affected.Received++
			case analyze.RoleExposed:
				out.Affected.Exposed++
			}
		}
	}
	return out
}

func checkFormat(f string) error {
	switch f {
	case "table", "json", "csv":
		return nil
	}
	return usageError{fmt.Errorf("--format: %q must be table, json or csv", f)}
}

// findingJSON is the documented JSON line of `kvtrail findings` (docs/formats.md).
type findingJSON struct {
	FindingID          string            `json:"finding_id"`
	RunID              string            `json:"run_id"`
	Analyzer           string            `json:"analyzer"`
	AnalyzerVersion    string            `json:"analyzer_version"`
	Severity           string            `json:"severity"`
	Confidence         float64           `json:"confidence"`
	TS                 time.Time         `json:"ts"`
	FirstTS            time.Time         `json:"first_ts"`
	LastTS             time.Time         `json:"last_ts"`
	RequestKey         string            `json:"request_key"`
	RequestID          string            `json:"request_id"`
	Tenant             string            `json:"tenant"`
	BootstrapRoom      uint64            `json:"bootstrap_room"`
	PrefillNode        string            `json:"prefill_node"`
	DecodeNode         string            `json:"decode_node"`
	DecodeDPRank       int16             `json:"decode_dp_rank"`
	RIDs               []string          `json:"rids"`
	Title              string            `json:"title"`
	Explanation        string            `json:"explanation"`
	GroupKey           string            `json:"group_key"`
	ForeignTenants     []string          `json:"foreign_tenants"`
	ForeignRequestKeys []string          `json:"foreign_request_keys"`
	EvidenceLineIDs    []string          `json:"evidence_line_ids"`
	Details            map[string]string `json:"details"`
}

func u64s(v []uint64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprint(x)
	}
	return out
}

func newFindingsCmd(a *app) *cobra.Command {
	var severity, format string
	c := &cobra.Command{
		Use:   "findings [--severity S] [--format table|json|csv]",
		Short: "Print the findings of each analyzer's latest run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			sev := strings.ToUpper(severity)
			if sev != "" && analyze.Severity(sev).Rank() >= len(analyze.Severities) {
				return usageError{fmt.Errorf("--severity: %q must be HIGH, MEDIUM, LOW or NOTE", severity)}
			}
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			fs, err := s.LatestFindings(cmd.Context())
			if err != nil {
				return err
			}
			var out []findingJSON
			for _, f := range fs {
				if sev != "" && string(f.Severity) != sev {
					continue
				}
				out = append(out, findingJSON{f.ID, f.RunID, f.Analyzer, f.AnalyzerVersion, string(f.Severity), f.Confidence,
					f.TS, f.FirstTS, f.LastTS, f.RequestKey, f.GatewayRequestID, f.Tenant, f.Room, f.PrefillNode, f.DecodeNode,
					f.DecodeDPRank, nonNilS(f.RIDs), f.Title, f.Explanation, f.GroupKey, nonNilS(f.ForeignTenants),
					nonNilS(f.ForeignRequestKeys), u64s(f.Evidence), f.Details})
			}
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				return writeJSONLines(w, out)
			case "csv":
				cw := csv.NewWriter(w)
				_ = cw.Write([]string{"finding_id", "analyzer", "analyzer_version", "severity", "confidence", "ts", "request_id",
					"tenant", "bootstrap_room", "prefill_node", "decode_node", "title", "explanation", "evidence_line_ids"})
				for _, f := range out {
					_ = cw.Write([]string{f.FindingID, f.Analyzer, f.AnalyzerVersion, f.Severity, fmt.Sprintf("%.2f", f.Confidence),
						f.TS.Format(time.RFC3339), f.RequestID, f.Tenant, fmt.Sprint(f.BootstrapRoom), f.PrefillNode, f.DecodeNode,
						f.Title, f.Explanation, strings.Join(f.EvidenceLineIDs, " ")})
				}
				cw.Flush()
				return cw.Error()
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEVERITY\tCONF\tANALYZER\tTIME\tTENANT\tREQUEST\tTITLE")
			for _, f := range out {
				fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%s\t%s\t%s\n", f.Severity, f.Confidence, f.Analyzer,
					f.TS.Format("2006-01-02 15:04:05"), f.Tenant, f.RequestKey, f.Title)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&severity, "severity", "", "only this severity: HIGH, MEDIUM, LOW or NOTE")
	c.Flags().StringVar(&format, "format", "table", "table, json (one object per line) or csv")
	return c
}

// affectedJSON is the documented JSON line of `kvtrail affected`.
type affectedJSON struct {
	ReconstructionID string    `json:"reconstruction_id"`
	Tenant           string    `json:"tenant"`
	Role             string    `json:"role"`
	Requests         int       `json:"requests"`
	FirstTS          time.Time `json:"first_ts"`
	LastTS           time.Time `json:"last_ts"`
	Models           []string  `json:"models"`
	Nodes            []string  `json:"nodes"`
	Confidence       float64   `json:"confidence"`
	RequestKeys      []string  `json:"request_keys"`
	FindingIDs       []string  `json:"finding_ids"`
	// Tier is confirmed, likely or possible on exposed rows, "" on
	// received rows.
	Tier         string   `json:"tier"`
	Counterparts []string `json:"counterparts"`
	PromptTokens int64    `json:"prompt_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	// Evidence line ids exceed 2^53: strings, as in findings output.
	Evidence []string `json:"evidence_line_ids"`
}

func newAffectedCmd(a *app) *cobra.Command {
	var role, format, tier string
	c := &cobra.Command{
		Use:   "affected [--role received|exposed] [--tier confirmed|likely|possible] [--format table|json|csv]",
		Short: "Print the latest affected-customer list (the notification list)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			wantRole, err := domain.ParseRole(role)
			if err != nil {
				return usageError{fmt.Errorf("--role: %w", err)}
			}
			wantTier, err := domain.ParseTier(tier)
			if err != nil {
				return usageError{fmt.Errorf("--tier: %w", err)}
			}
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			rec, err := analyze.LatestAffected(cmd.Context(), s)
			if err != nil {
				return err
			}
			var out []affectedJSON
			for _, r := range rec.Rows {
				if wantRole != "" && r.Role != wantRole {
					continue
				}
				if wantTier != "" && r.Tier != wantTier {
					continue // a tier filter keeps exposed rows of that tier only
				}
				ev := make([]string, len(r.Evidence))
				for i, l := range r.Evidence {
					ev[i] = strconv.FormatUint(l, 10)
				}
				out = append(out, affectedJSON{rec.ID, r.Tenant, string(r.Role), r.Requests, r.First, r.Last, nonNilS(r.Models),
					nonNilS(r.Nodes), r.Confidence, nonNilS(r.RequestKeys), nonNilS(r.FindingIDs), string(r.Tier),
					nonNilS(r.Counterparts), r.PromptTokens, r.OutputTokens, ev})
			}
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				return writeJSONLines(w, out)
			case "csv":
				cw := csv.NewWriter(w)
				_ = cw.Write([]string{"reconstruction_id", "tenant", "role", "requests", "first_ts", "last_ts", "models", "nodes",
					"confidence", "request_keys", "finding_ids", "tier", "counterparts", "prompt_tokens", "output_tokens",
					"evidence_line_ids"})
				for _, r := range out {
					_ = cw.Write([]string{r.ReconstructionID, r.Tenant, r.Role, fmt.Sprint(r.Requests), r.FirstTS.Format(time.RFC3339),
						r.LastTS.Format(time.RFC3339), strings.Join(r.Models, " "), strings.Join(r.Nodes, " "),
						fmt.Sprintf("%.2f", r.Confidence), strings.Join(r.RequestKeys, " "), strings.Join(r.FindingIDs, " "),
						r.Tier, strings.Join(r.Counterparts, " "), fmt.Sprint(r.PromptTokens), fmt.Sprint(r.OutputTokens),
						strings.Join(r.Evidence, " ")})
				}
				cw.Flush()
				return cw.Error()
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ROLE\tTIER\tTENANT\tREQUESTS\tFIRST\tLAST\tCONF\tNODES\tMODELS")
			for _, r := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%.2f\t%s\t%s\n", r.Role, r.Tier, r.Tenant, r.Requests,
					r.FirstTS.Format("2006-01-02 15:04:05"), r.LastTS.Format("2006-01-02 15:04:05"), r.Confidence,
					strings.Join(r.Nodes, ","), strings.Join(r.Models, ","))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&role, "role", "", "only this role: received or exposed")
	c.Flags().StringVar(&tier, "tier", "", "only exposed rows of this tier: confirmed, likely or possible (default all, most certain first)")
	c.Flags().StringVar(&format, "format", "table", "table, json (one object per line) or csv")
	return c
}

func writeJSONLines[T any](w io.Writer, rows []T) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func nonNilS(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
