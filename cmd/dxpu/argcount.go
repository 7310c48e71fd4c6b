package main

import (
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
