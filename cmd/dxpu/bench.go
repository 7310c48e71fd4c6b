package main

import "github.com/spf13/cobra"

// newBenchCmd builds `dxpu bench`, the parent of bench link, bench switch
// and bench fabric.
func newBenchCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure dxpu components: bridge link, switch, fabric, the wall-clock path end to end",
	}
	cmd.AddCommand(newBenchLinkCmd(), newBenchSwitchCmd(), newBenchFabricCmd(), newBenchE2ECmd(e))
	return cmd
}
