package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/chlocal"
)

func newClickHouseCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "clickhouse", Short: "Manage the private local ClickHouse"}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the managed clickhouse-server in the foreground until interrupted",
		Long: `run starts the same private clickhouse-server kvtrail starts when no
clickhouse.addr is configured, prints its native address, and stops it on
SIGINT/SIGTERM. The test script uses it to share one server across a whole
go test run (KVTRAIL_TEST_CLICKHOUSE_ADDR).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv, err := chlocal.Start(cmd.Context(), chlocal.Options{
				Binary: a.cfg.Local.Binary, Dir: a.cfg.Local.DataDir, StartTimeout: a.cfg.Local.StartTimeout,
			})
			if err != nil {
				return err
			}
			defer srv.Stop()
			if f, _ := cmd.Flags().GetString("addr-file"); f != "" {
				if err := os.WriteFile(f, []byte(srv.Addr+"\n"), 0o600); err != nil {
					return fmt.Errorf("write addr file: %w", err)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), srv.Addr)
			a.log.Info("managed ClickHouse running", slog.String("addr", srv.Addr), slog.String("dir", srv.Dir()))
			<-cmd.Context().Done()
			return nil
		},
	}
	run.Flags().String("addr-file", "", "also write the native address to this file once ready")
	c.AddCommand(run)
	return c
}

func init() { extraCommands = append(extraCommands, newClickHouseCmd) }
