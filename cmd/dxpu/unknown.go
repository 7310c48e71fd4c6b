package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownSubcommands makes every command that only groups others
// (bench, ctl, pcap, tlp, ...) refuse an unknown subcommand with exit
// status 2 and a suggestion, as the root does, instead of printing its
// help and succeeding. Alone, such a command still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() || c == c.Root() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2
	c.FParseErrWhitelist.UnknownFlags = true // the subcommand's flags: name the subcommand first
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return exitCodeError{2, unknownSubcommand(cmd, args[0])}
	}
}

// unknownSubcommand is the error for name under cmd, with the closest
// subcommands by name, if any.
func unknownSubcommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		msg += "; want one of " + strings.Join(names, ", ")
	}
	return fmt.Errorf("%s", msg)
}
