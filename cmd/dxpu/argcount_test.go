package main

import (
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/syncbuf"
)

// TestArgCountErrorsNameTheCommand: a command given too few or too many
// arguments says which command, what it wanted and its usage, on one
// line, exit 2, nothing on stdout (cobra's own words named neither); so
// does ctl's --timeout 0 (it failed with "context deadline exceeded").
func TestArgCountErrorsNameTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ctl", "free"}, "dxpu: ctl free: requires at least 1 arg(s), only received 0; usage: dxpu ctl free ID..."},
		{[]string{"ctl", "drain"}, "dxpu: ctl drain: accepts 1 arg(s), received 0; usage: dxpu ctl drain BOX"},
		{[]string{"ctl", "box", "a", "b"}, "dxpu: ctl box: accepts at most 1 arg(s), received 2; usage: dxpu ctl box [ID]"},
		{[]string{"ctl", "stats", "--timeout", "0"}, "dxpu: --timeout 0s: must be positive"},
		{[]string{"ctl", "stats", "--timeout", "-1s"}, "dxpu: --timeout -1s: must be positive"},
		{[]string{"pcap", "convert", "in.pcap", "out.pcap"}, `dxpu: pcap convert: takes no operands, got "in.pcap"; usage: dxpu pcap convert --in A --out B --to nettlp|dxpu-eth|dxpu-udp`},
		{[]string{"pcap", "info"}, "dxpu: pcap info: requires at least 1 arg(s), only received 0; usage: dxpu pcap info FILE..."},
		// help takes a command path and nothing after it: `help units
		// extra` printed the topic and exited 0, `help nosuch` the root's
		// usage.
		{[]string{"help", "units", "extra"}, `dxpu: help: "dxpu units" has no subcommands, got "extra"; usage: dxpu help [command]`},
		{[]string{"help", "bench", "link", "x.pcap"}, `dxpu: help: "dxpu bench link" has no subcommands, got "x.pcap"; usage: dxpu help [command]`},
		{[]string{"help", "bench", "lnk"}, `dxpu: help: unknown command "lnk" for "dxpu bench"; did you mean link?`},
		{[]string{"help", "nosuch"}, `dxpu: help: unknown command "nosuch" for "dxpu"; want one of bench, bridge, chaos, completion, conform, ctl, demo, man, manager, model, nettlp, pcap, replay, switch, tlp, units, vm`},
	} {
		var errb syncbuf.Buffer
		var out strings.Builder
		code := run(t.Context(), newEnv(strings.NewReader(""), &out, &errb, tc.args, noEnv))
		stderr := errb.String()
		if code != 2 || strings.TrimSpace(stderr) != tc.want || out.Len() != 0 {
			t.Errorf("dxpu %v: exit %d, stdout %q, stderr %q; want 2, nothing and %q", tc.args, code, out.String(), stderr, tc.want)
		}
	}
}
