package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// suggestFlag is the flag error function of every command: an unknown
// flag gets the closest flags of its command by name, as an unknown
// command gets its closest commands; other flag errors pass unchanged.
func suggestFlag(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var name, shown string
	if n, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		name, shown = n, "--"+n
	} else if rest, ok := strings.CutPrefix(msg, "unknown shorthand flag: '"); ok && len(rest) > 0 {
		name, shown = rest[:1], "-"+rest[:1]
	} else {
		return err
	}
	var names []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] || f.Deprecated != "" {
			return
		}
		seen[f.Name] = true
		if closeName(name, f.Name) || (len(name) == 1 && f.Shorthand != "" && strings.EqualFold(name, f.Shorthand)) {
			names = append(names, "--"+f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if len(names) == 0 {
		return fmt.Errorf("unknown flag %s for %q (see '%s --help')", shown, cmd.CommandPath(), cmd.CommandPath())
	}
	return fmt.Errorf("unknown flag %s for %q; did you mean %s?", shown, cmd.CommandPath(), strings.Join(names, " or "))
}

// closeName: name is a likely misspelling of flag: within 2 edits (1 for
// names of up to 4 letters), or a prefix of it of at least 3 letters.
func closeName(name, flag string) bool {
	if len(name) >= 3 && strings.HasPrefix(flag, name) {
		return true
	}
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	return len(name) > 1 && levenshtein(strings.ToLower(name), flag) <= limit
}

// levenshtein is the edit distance of a and b (insertions, deletions,
// substitutions), by bytes: flag names are ASCII.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
