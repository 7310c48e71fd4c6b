package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// takesOperands are the commands whose operands are theirs (files, IDs,
// hex TLPs, traces, a command path); every other command refuses one.
var takesOperands = map[string]bool{
	"dxpu tlp decode": true, "dxpu model": true, "dxpu pcap info": true, "dxpu pcap unseal": true,
	"dxpu ctl box": true, "dxpu ctl box add": true, "dxpu ctl box rm": true,
	"dxpu ctl host add": true, "dxpu ctl host rm": true, "dxpu ctl gpu fail": true, "dxpu ctl gpu heal": true,
	"dxpu ctl free": true, "dxpu ctl rekey": true, "dxpu ctl drain": true,
}

// TestEveryCommandRefusesStrayOperands walks the command tree: every
// command not in takesOperands, help topics and cobra's completion
// included, refuses an operand it does not take with exit status 2 and
// one line on stderr naming it, and runs nothing (`dxpu units extra`
// printed the topic and exited 0, as did `dxpu completion extra`). Every
// runnable command says what operands it takes (an Args validator):
// without one cobra takes any, silently.
func TestEveryCommandRefusesStrayOperands(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := c.CommandPath()
		seen[path] = true
		if c.Runnable() && c.Args == nil {
			t.Errorf("%s has no Args validator: it takes any operands", path)
		}
		if c == root || c.Hidden || takesOperands[path] {
			return
		}
		args := append(strings.Fields(strings.TrimPrefix(path, "dxpu")), "stray-operand")
		// A command that took the operand would run: let it find its
		// context done rather than start a daemon.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb strings.Builder
		code := run(ctx, newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
		stderr := strings.TrimSpace(errb.String())
		if code != 2 || out.Len() != 0 || strings.Contains(stderr, "\n") || !strings.Contains(stderr, `"stray-operand"`) {
			t.Errorf("dxpu %s: exit %d, stdout %.80q, stderr %q; want 2 and one line naming the operand", strings.Join(args, " "), code, out.String(), stderr)
		}
	}
	walk(root)
	for path := range takesOperands {
		if !seen[path] {
			t.Errorf("takesOperands names %q: no such command", path)
		}
	}
	for _, want := range []string{"dxpu units", "dxpu completion", "dxpu completion bash"} {
		if !seen[want] {
			t.Errorf("the tree has no %q", want)
		}
	}
}
