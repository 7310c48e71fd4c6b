package main

import "github.com/spf13/cobra"

// newBenchCmd builds `dxpu bench`, the parent of bench link, bench switch
// and bench fabric.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure dxpu components: bridge link, switch, fabric",
	}
	cmd.AddCommand(newBenchLinkCmd(), newBenchSwitchCmd(), newBenchFabricCmd())
	return cmd
}
