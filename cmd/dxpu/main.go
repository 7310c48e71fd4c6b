// Command dxpu is the single binary of the dxpu project: codecs, bridges,
// switch, control plane, emulator, performance model and benchmarks, one
// cobra subcommand each. Each command is built by a constructor over an
// env (streams, arguments, environment, logger), parses its flags into a
// product's options (internal/app/...) and maps the product's errors to
// exit statuses.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/dxpu/dxpu/fabric/oneline"
)

func main() {
	os.Exit(run(context.Background(), newEnv(os.Stdin, os.Stdout, os.Stderr, os.Args[1:], os.Getenv)))
}

// run runs the command line of e and returns the process's exit status,
// after printing the error, if any, on e's stderr in one line (oneline.Escape).
func run(ctx context.Context, e *env) int {
	err := executeRoot(ctx, newRootCmd(e), e.args)
	if err == nil {
		return 0
	}
	var ec exitCodeError
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintln(e.stderr, "dxpu:", oneline.Escape(ec.err.Error()))
		}
		return ec.code
	}
	fmt.Fprintln(e.stderr, "dxpu:", oneline.Escape(err.Error()))
	return 2
}
