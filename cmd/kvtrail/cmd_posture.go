package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/posture"
)

func init() {
	extraCommands = append(extraCommands, newPostureCmd)
}

func newPostureCmd(a *app) *cobra.Command {
	var (
		asJSON, all bool
		node        string
	)
	c := &cobra.Command{
		Use:   "posture [--json] [--all] [--node N]",
		Short: "Per node and boot: PD mode, version, KV pool vs context, deferred release, known bugs exposed",
		Long: `posture reads, from the boot lines kvtrail stored (server_args, the scheduler
limits line, version lines and environment dumps near a boot), each node's
role and PD mode, SGLang version, page size, KV pool against context length
and the resulting max_req_input_len, deferred KV release and the decode
metadata read check, and which known bugs (posture/knownbugs.json, each with
its upstream sources) that boot is exposed to. A value that was not logged
reads "unknown". By default only each node's latest boot is shown.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, closeFn, err := a.openMigrated(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			f, err := posture.Load(cmd.Context(), s)
			if err != nil {
				return err
			}
			// Regressions compare consecutive boots: before any filtering.
			regs := f.Regressions()
			if node != "" {
				var keep []posture.Regression
				for _, r := range regs {
					if r.Node == node {
						keep = append(keep, r)
					}
				}
				regs = keep
				f.Boots = f.Node(node)
				if len(f.Boots) == 0 {
					return usageError{fmt.Errorf("--node: no boot of %q is stored", node)}
				}
			}
			if !all {
				f.Boots = f.Latest()
			}
			if asJSON {
				out := struct {
					*posture.Fleet
					Regressions []posture.Regression `json:"regressions"`
				}{f, regs}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			return f.WriteTable(cmd.OutOrStdout(), false)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (boots, known bugs, regressions)")
	c.Flags().BoolVar(&all, "all", false, "every boot, not only each node's latest")
	c.Flags().StringVar(&node, "node", "", "only this node")
	return c
}
