package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd builds `dxpu man`: man pages for every command, generated from
// the command tree itself so they cannot drift from --help.
func newManCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "man --dir DIR",
		Short: "Write a man page (section 1) for every command into DIR",
		Long: `man writes dxpu.1, dxpu-bridge.1, dxpu-ctl-box-add.1, ... into --dir, from
the same text as --help. Install them with, for example:

  dxpu man --dir /usr/local/share/man/man1 && mandb`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return exitCodeError{2, errors.New("man: --dir is required")}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return exitCodeError{2, fmt.Errorf("man: --dir: %w", err)}
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // keep the pages reproducible
			hdr := &doc.GenManHeader{Title: "DXPU", Section: "1", Source: "dxpu", Manual: "dxpu manual"}
			if err := doc.GenManTree(root, hdr, dir); err != nil {
				return exitCodeError{2, fmt.Errorf("man: %w", err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "man pages written to %s\n", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the pages (created if missing)")
	return cmd
}
