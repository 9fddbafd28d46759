package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/web"
)

func newDemoCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "demo",
		Short: "Start ClickHouse (managed unless configured), apply the schema and serve until interrupted",
		Long: `demo is the first thing to run: with no ClickHouse configured it starts a
private clickhouse-server under local.data_dir (reused by the next run),
applies the schema and serves kvtrail until Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, closeFn, err := a.openStore(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := a.migrate(ctx, s); err != nil {
				return err
			}
			login := ""
			if len(a.cfg.Auth.Users) == 0 {
				u, err := web.DemoUser()
				if err != nil {
					return err
				}
				a.cfg.Auth.Users = []config.User{u}
				login = fmt.Sprintf("Demo login: %s / %s (role %s)\n", u.Name, web.DemoPassword, u.Role)
			}
			return a.serve(ctx, s, func(url string) {
				fmt.Fprintf(cmd.OutOrStdout(), "\nkvtrail is up: %s  (health: %s/readyz)\n%sPress Ctrl-C to stop; ClickHouse data stays in %s.\n\n",
					url, url, login, a.cfg.Local.DataDir)
			})
		},
	}
	c.Flags().String("addr", "", "listen address host:port (default 127.0.0.1:8080)")
	bindFlag(c.Flags().Lookup("addr"), "serve.addr")
	return c
}
