package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/migrations"
)

func newMigrateCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations (safe to run concurrently; a no-op when up to date)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, closeFn, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			m, err := chstore.NewMigrator(s, migrations.FS)
			if err != nil {
				return err
			}
			ran, err := m.Up(cmd.Context())
			for _, mg := range ran {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %s\n", mg.Name)
			}
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			if len(ran) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
			}
			return nil
		},
	}
	c.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, closeFn, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			m, err := chstore.NewMigrator(s, migrations.FS)
			if err != nil {
				return err
			}
			st, err := m.Status(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tNAME\tSTATE\tAPPLIED AT\tBY")
			for _, r := range st {
				state, at := "pending", ""
				if r.Applied {
					state, at = "applied", r.AppliedAt.UTC().Format(time.RFC3339)
				}
				if r.Changed {
					state = "CHANGED since applied"
				}
				if r.Unknown {
					state = "applied, unknown to this kvtrail"
				}
				fmt.Fprintf(w, "%04d\t%s\t%s\t%s\t%s\n", r.Version, r.Name, state, at, r.AppliedBy)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return printHostStatus(cmd.Context(), cmd.OutOrStdout(), m)
		},
	})
	return c
}
