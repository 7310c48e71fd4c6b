package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// nameArgCountErrors makes cobra's argument-count errors ("requires at
// least 1 arg(s), only received 0") say which command wanted what, with
// its usage line, on the one line the error gets: `dxpu pcap info` alone
// printed only cobra's words. Errors of a command's own Args check pass
// as they are.
func nameArgCountErrors(c *cobra.Command) {
	for _, sub := range c.Commands() {
		nameArgCountErrors(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	leaf := !c.HasSubCommands()
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		switch {
		case err == nil:
			return nil
		case leaf && len(args) > 0 && strings.HasPrefix(err.Error(), "unknown command"):
			// cobra.NoArgs calls an operand a command: `pcap convert
			// in.pcap out.pcap` said `unknown command "in.pcap"`.
			err = fmt.Errorf("takes no operands, got %q", args[0])
		case !strings.Contains(err.Error(), " arg(s)"):
			return err
		}
		return exitCodeError{2, fmt.Errorf("%s: %w; usage: %s", strings.TrimPrefix(cmd.CommandPath(), "dxpu "), err, strings.TrimSuffix(cmd.UseLine(), " [flags]"))}
	}
}

// refuseTopicOperands refuses operands after a help topic, exit 2 in one
// line, as `help units extra` is refused: `dxpu units extra` printed the
// topic and succeeded. Cobra checks no operands of a command without a
// Run (it prints the command's help instead, and returns no error), so
// the check looks at the command line before the tree runs it. A flag
// error or --help is left to the tree.
func refuseTopicOperands(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == nil || !cmd.IsAdditionalHelpTopicCommand() {
		return nil
	}
	cmd.InitDefaultHelpFlag()
	if cmd.ParseFlags(rest) != nil {
		return nil
	}
	if help, _ := cmd.Flags().GetBool("help"); help || cmd.Flags().NArg() == 0 {
		return nil
	}
	return exitCodeError{2, fmt.Errorf("%s: takes no operands, got %q; usage: %s help %s",
		strings.TrimPrefix(cmd.CommandPath(), root.Name()+" "), cmd.Flags().Arg(0), root.Name(), cmd.Name())}
}

// executeRoot runs the command line args of root, built by newRootCmd over
// them: refuseTopicOperands, then the tree.
func executeRoot(ctx context.Context, root *cobra.Command, args []string) error {
	if err := refuseTopicOperands(root, args); err != nil {
		return err
	}
	return root.ExecuteContext(ctx)
}

// newHelpCmd is `dxpu help [command]`: cobra's own, except that operands
// left after the command path are refused, exit 2 in one line, as every
// command refuses extra operands (`help units extra` printed the topic and
// succeeded), and so is a command that does not exist (`help nosuch`
// printed the root's usage and succeeded).
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long: `Help provides help for any command in the application.
Simply type dxpu help [path to command] for full details.`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			// Help topics (units) too: they are what help is for, and
			// `help u` completed nothing.
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if (sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand()) && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			switch {
			case err != nil || cmd == nil:
				return exitCodeError{2, fmt.Errorf("help: %w", unknownHelpTopic(c.Root(), args[0]))}
			case len(rest) > 0 && cmd.HasSubCommands():
				return exitCodeError{2, fmt.Errorf("help: %w", unknownHelpTopic(cmd, rest[0]))}
			case len(rest) > 0:
				return exitCodeError{2, fmt.Errorf("help: %q has no subcommands, got %q; usage: %s", cmd.CommandPath(), rest[0],
					strings.TrimSuffix(c.UseLine(), " [flags]"))}
			}
			cmd.InitDefaultHelpFlag() // --help and --version are listed, as cobra's help does
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

// unknownHelpTopic is unknownSubcommand for help, under which the help
// topics (units) count as commands too.
func unknownHelpTopic(cmd *cobra.Command, name string) error {
	if len(cmd.SuggestionsFor(name)) > 0 {
		return unknownSubcommand(cmd, name)
	}
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			names = append(names, sub.Name())
		}
	}
	return fmt.Errorf("unknown command %q for %q; want one of %s", name, cmd.CommandPath(), strings.Join(names, ", "))
}
