package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/simulate/live"
)

// newSimulateServeCmd is `kvtrail simulate serve`: a live simulated PD
// cluster behind an OpenAI-compatible endpoint.
func newSimulateServeCmd(a *app) *cobra.Command {
	var (
		cfg       live.Config
		addr      string
		pushToken string
	)
	cfg.Engine = live.Engine{}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve a live simulated PD cluster (OpenAI-compatible) that writes its logs as it runs",
		Long: `simulate serve answers POST /v1/chat/completions (streaming and not) with a small
prefill/decode cluster whose decode node has a real paged KV pool. With the
prefill pool below the context length on a version before 0.5.20 (and not
--fixed), a prompt between max_req_input_len and the context length is served
from stale pages: the answer carries earlier requests' text. It writes SGLang,
Mooncake and gateway logs live to --log-dir and/or pushes them to a kvtrail
serve (--push http://HOST:8080/loki/api/v1/push with an ingester token in
--push-token or KVTRAIL_PUSH_TOKEN), and sends background traffic from
--tenants tenants. POST /admin/reboot with an engine JSON
({"prefill_pool":..,"context_len":..,"version":"0.5.11","fixed":false,"deferred_release":false})
reboots with new switches; GET /admin/state shows the counters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pushToken == "" {
				pushToken = os.Getenv("KVTRAIL_PUSH_TOKEN")
			}
			cfg.PushToken = pushToken
			if cfg.LogDir == "" && cfg.PushURL == "" {
				return usageError{fmt.Errorf("give --log-dir and/or --push: the cluster's logs must go somewhere")}
			}
			cfg.Log = a.log
			cl, err := live.New(cfg)
			if err != nil {
				return usageError{err}
			}
			defer cl.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go cl.Background(ctx)
			return live.ListenAndServe(ctx, addr, cl.Handler(), a.log, func(url string) {
				fmt.Fprintf(cmd.OutOrStdout(), "live cluster on %s (OpenAI base URL)\n", url)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8100", "listen address")
	f.IntVar(&cfg.Engine.ContextLen, "context-len", 8192, "context length (tokens = words)")
	f.IntVar(&cfg.Engine.PrefillPool, "prefill-pool", 16384, "prefill max_total_num_tokens (below --context-len opens the #30233 window)")
	f.IntVar(&cfg.DecodePool, "decode-pool", 0, "decode max_total_num_tokens (default 4x the context length)")
	f.IntVar(&cfg.PageSize, "page-size", 16, "page size in tokens")
	f.StringVar(&cfg.Engine.Version, "sglang-version", "0.5.22", "SGLang version the nodes report (the engine fix is in 0.5.20)")
	f.BoolVar(&cfg.Engine.Fixed, "fixed", false, "refuse over-limit prompts whatever the version")
	f.BoolVar(&cfg.Engine.DeferredRelease, "deferred-release", true, "report deferred KV release on (environment line)")
	f.StringVar(&cfg.LogDir, "log-dir", "", "write <node>.log files here")
	f.StringVar(&cfg.PushURL, "push", "", "Loki push URL of a kvtrail serve")
	f.StringVar(&pushToken, "push-token", "", "ingester token for --push (or KVTRAIL_PUSH_TOKEN; flags show in ps)")
	f.DurationVar(&cfg.PushEvery, "push-every", 250*time.Millisecond, "push batching interval")
	f.IntVar(&cfg.Tenants, "tenants", 8, "background tenants")
	f.Float64Var(&cfg.Rate, "rate", 5, "background requests per second (all tenants)")
	f.Float64Var(&cfg.LongShare, "long-share", 0.05, "share of background requests with long prompts (upper quarter of the context)")
	return c
}
