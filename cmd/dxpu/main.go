// Command dxpu is the single binary of the dxpu project: codecs, bridges,
// switch, control plane, emulator, performance model and benchmarks, one
// cobra subcommand each. Subcommands live one per file and register
// themselves on rootCmd from init.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := rootCmd.Execute(); err != nil {
		var ec exitCodeError
		if errors.As(err, &ec) {
			if ec.err != nil {
				fmt.Fprintln(os.Stderr, "dxpu:", ec.err)
			}
			os.Exit(ec.code)
		}
		fmt.Fprintln(os.Stderr, "dxpu:", err)
		os.Exit(2)
	}
}
