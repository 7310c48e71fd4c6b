package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd builds `dxpu man`: man pages for every command, generated from
// the command tree itself so they cannot drift from --help.
func newManCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "man --dir DIR",
		Short: "Write a man page (section 1) for every command into the directory of --dir",
		Long: `man writes dxpu.1, dxpu-bridge.1, dxpu-ctl-box-add.1, ... into --dir, from
the same text as --help, and dxpu-units.1 from 'dxpu help units'. Install
them with, for example:

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
			// GenManTree skips help topics: `dxpu help units` gets its page
			// here, dxpu-units.1.
			if err := genTopicPages(root, hdr, dir); err != nil {
				return exitCodeError{2, fmt.Errorf("man: %w", err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "man pages written to %s\n", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the pages (created if missing)")
	return cmd
}

// genTopicPages writes a page for each help topic of root (a command
// without a Run, such as units) as dxpu-TOPIC.1: its text kept as written
// (no fill: the topic lines up its columns), invoked as `dxpu help TOPIC`.
func genTopicPages(root *cobra.Command, hdr *doc.GenManHeader, dir string) error {
	for _, c := range root.Commands() {
		if !c.IsAdditionalHelpTopicCommand() {
			continue
		}
		name := root.Name() + "-" + c.Name()
		var b strings.Builder
		fmt.Fprintf(&b, ".nh\n.TH %q %q \"\" %q %q\n", strings.ToUpper(name), hdr.Section, hdr.Source, hdr.Manual)
		fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", name, roffEscape(c.Short))
		fmt.Fprintf(&b, ".SH SYNOPSIS\n\\fB%s help %s\\fP\n", root.Name(), c.Name())
		fmt.Fprintf(&b, ".SH DESCRIPTION\n.nf\n%s\n.fi\n", roffEscape(c.Long))
		fmt.Fprintf(&b, ".SH SEE ALSO\n\\fB%s(%s)\\fP\n", root.Name(), hdr.Section)
		if err := os.WriteFile(filepath.Join(dir, name+"."+hdr.Section), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// roffEscape keeps text literal in a man page: backslashes escaped, and
// a line that starts with a period or quote not taken for a request.
func roffEscape(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, `\`, `\e`), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
