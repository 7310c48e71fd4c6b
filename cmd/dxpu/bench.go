package main

import "github.com/spf13/cobra"

// newBenchCmd builds `dxpu bench`, the parent of bench link, bench switch,
// bench fabric, bench e2e, bench manager and bench scale.
func newBenchCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure dxpu components: bridge link, switch, fabric, the wall-clock path end to end, the manager",
	}
	cmd.AddCommand(newBenchLinkCmd(), newBenchSwitchCmd(), newBenchFabricCmd(), newBenchE2ECmd(e), newBenchManagerCmd(), newBenchScaleCmd(e))
	return cmd
}
