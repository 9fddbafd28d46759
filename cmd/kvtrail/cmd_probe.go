package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/probe"
)

func init() {
	extraCommands = append(extraCommands, newProbeCmd)
}

// errProbeFindings makes `kvtrail probe` exit non-zero when a probe found
// something, so it can gate a deployment.
type errProbeFindings struct{ n int }

func (e errProbeFindings) Error() string {
	return fmt.Sprintf("%d canary probe finding(s): a leak or an over-limit prompt served", e.n)
}

func newProbeCmd(a *app) *cobra.Command {
	var (
		rounds     int
		identities []string
		thresholds []string
		noStore    bool
		asJSON     bool
	)
	c := &cobra.Command{
		Use:   "probe [--rounds N] [--identity NAME=KEY ...] [--threshold TOKENS[@NODE] ...]",
		Short: "Send canary marker probes to an OpenAI-compatible endpoint and check every answer",
		Long: `probe sends rounds of chat completions (streaming and not) from at least two
identities (API keys). Every prompt carries a unique marker and asks for it
back; an answer carrying any other probe's marker is a leak. With
probes.max_prompt_tokens > 0 it also sends, for each PD prefill node's
rejection threshold (from posture, or --threshold), one prompt just below and
one just above it, sized from the endpoint's usage.prompt_tokens: a 200 to
the one above is a finding. Results are stored in the probes table (unless
--no-store) for the canary_probe analyzer. Exits 1 when a probe found
something. Settings come from the probes config section (docs/prevention.md).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg.Probes
			if len(identities) > 0 {
				cfg.Identities = nil
				for _, s := range identities {
					name, key, ok := strings.Cut(s, "=")
					if !ok || name == "" {
						return usageError{fmt.Errorf("--identity: %q is not NAME=KEY", s)}
					}
					cfg.Identities = append(cfg.Identities, config.ProbeIdentity{Name: name, APIKey: config.Secret(key)})
				}
			}
			if cfg.Endpoint == "" {
				return usageError{fmt.Errorf("no endpoint: set probes.endpoint or --endpoint")}
			}
			p, err := newProber(cfg)
			if err != nil {
				return usageError{err}
			}
			var manual []probe.Threshold
			for _, s := range thresholds {
				tok, node, _ := strings.Cut(s, "@")
				n, err := strconv.ParseUint(tok, 10, 64)
				if err != nil || n == 0 {
					return usageError{fmt.Errorf("--threshold: %q is not TOKENS[@NODE]", s)}
				}
				manual = append(manual, probe.Threshold{Node: node, Tokens: n})
			}
			ctx := cmd.Context()
			save := func([]probe.Result) error { return nil }
			th := manual
			if !noStore {
				s, closeFn, err := a.openMigrated(ctx)
				if err != nil {
					return err
				}
				defer closeFn()
				save = func(rs []probe.Result) error { return probe.Save(ctx, s, rs) }
				if len(th) == 0 {
					if th, err = probeThresholds(s, cfg)(ctx); err != nil {
						return err
					}
				}
			}
			if cfg.MaxPromptTokens == 0 && len(manual) == 0 {
				th = nil
			}
			var all []probe.Result
			for range max(1, rounds) {
				rs, err := p.Round(ctx, th)
				all = append(all, rs...)
				if serr := save(rs); serr != nil {
					return serr
				}
				if err != nil {
					return err
				}
			}
			if err := writeProbes(cmd, all, asJSON); err != nil {
				return err
			}
			n := 0
			for _, r := range all {
				if r.Finding() {
					n++
				}
			}
			if n > 0 {
				return errProbeFindings{n}
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&rounds, "rounds", 1, "rounds to send")
	f.StringArrayVar(&identities, "identity", nil, "NAME=KEY of a probe identity (repeat; replaces probes.identities; prefer the config file, flags show in ps)")
	f.StringArrayVar(&thresholds, "threshold", nil, "a rejection threshold TOKENS[@NODE] to probe around (repeat; instead of posture)")
	f.BoolVar(&noStore, "no-store", false, "do not store results in ClickHouse (no ClickHouse needed)")
	f.BoolVar(&asJSON, "json", false, "print results as JSON")
	f.String("endpoint", "", "OpenAI-compatible base URL (probes.endpoint)")
	bindFlag(f.Lookup("endpoint"), "probes.endpoint")
	f.String("model", "", "model name (probes.model)")
	bindFlag(f.Lookup("model"), "probes.model")
	f.Uint64("max-prompt-tokens", 0, "largest long probe in tokens, 0 = none (probes.max_prompt_tokens)")
	bindFlag(f.Lookup("max-prompt-tokens"), "probes.max_prompt_tokens")
	return c
}

func writeProbes(cmd *cobra.Command, rs []probe.Result, asJSON bool) error {
	w := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tIDENTITY\tKIND\tSTREAM\tTARGET\tPROMPT_TOK\tSTATUS\tVERDICT\tDETAIL")
	for _, r := range rs {
		detail := r.Err
		if len(r.ForeignMarkers) > 0 {
			detail = "foreign markers " + strings.Join(r.ForeignMarkers, ",") + " from probes " + strings.Join(r.ForeignProbes, ",")
		}
		if len(detail) > 80 {
			detail = detail[:80] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%d\t%d\t%s\t%s\n", r.ID, r.Identity, r.Kind, r.Stream, r.TargetTokens,
			r.PromptTokens, r.Status, r.Verdict, strconv.QuoteToGraphic(detail))
	}
	return tw.Flush()
}
