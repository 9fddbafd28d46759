package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

func newConfigCmd(a *app) *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Inspect the effective configuration"}
	c.AddCommand(&cobra.Command{
		Use:   "print",
		Short: "Print the effective config (file, env and flags merged) with secrets masked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := yaml.Marshal(a.cfg)
			if err != nil {
				return fmt.Errorf("encode config: %w", err)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	})
	return c
}
