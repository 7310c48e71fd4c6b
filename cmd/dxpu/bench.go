package main

import "github.com/spf13/cobra"

// benchCmd is the parent of the benchmark subcommands (bench link, bench
// switch, bench fabric); each adds itself with benchCmd.AddCommand.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure dxpu components: bridge link, switch, fabric",
}

func init() {
	rootCmd.AddCommand(benchCmd)
}
