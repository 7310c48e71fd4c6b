package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/syncbuf"
)

// daemonRunCode runs one command line as main does, under a deadline (a check
// that regresses lets a daemon start or the kit wait for a peer, and the
// test fails there instead of hanging), and returns the exit status,
// stdout and stderr.
func daemonRunCode(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var out strings.Builder
	var errb syncbuf.Buffer
	code := run(ctx, newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
	return code, out.String(), errb.String()
}

// daemonUsageLine checks a usage error as main prints it: exit 2, nothing on
// stdout, one line on stderr with want.
func daemonUsageLine(t *testing.T, want string, args ...string) {
	t.Helper()
	code, out, errs := daemonRunCode(t, args...)
	if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, want) {
		t.Errorf("dxpu %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(args, " "), code, out, errs, want)
	}
}

// TestBridgeDaemonFlags: every duration and count flag of `dxpu bridge`
// is checked up front, in one line naming the flag and the value given. A
// negative --keepalive ran (and made the bridge flood its peer); --mtu 0,
// --max-payload 0, --mps 0 and --pair 0 ran on defaults or a pair ID no
// pair has; --dead-after 0 named Go fields and a value never given.
func TestBridgeDaemonFlags(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "pair.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"bridge", "--role", "gpu", "--listen", "127.0.0.1:0", "--peer", "127.0.0.1:9", "--pcie", "memory"}
	unkeyed := append(append([]string(nil), base...), "--insecure-no-keys")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keepalive", "-5ms"}, "--keepalive -5ms: must not be negative"},
		{[]string{"--dead-after", "-1s"}, "--dead-after -1s: must not be negative"},
		{[]string{"--completion-timeout", "-1s"}, "--completion-timeout -1s: must not be negative"},
		{[]string{"--keepalive", "0"}, "--keepalive 0s: must be positive"},
		{[]string{"--dead-after", "0"}, "--dead-after 0s: must be positive"},
		{[]string{"--keepalive", "2s"}, "--dead-after 1s (the default) must exceed --keepalive 2s"},
		{[]string{"--dead-after", "10ms"}, "--dead-after 10ms must exceed --keepalive 50ms (the default)"},
		{[]string{"--mtu", "0"}, "--mtu 0: must be positive"},
		{[]string{"--mtu", "-3"}, `invalid argument "-3" for "--mtu" flag: want a byte count like 64M, 4096 or 0x1000`},
		{[]string{"--mtu", "10"}, "--mtu 10: bridge: bad config: MTU: 10 cannot carry one"},
		{[]string{"--max-payload", "0"}, "--max-payload 0: must be positive"},
		{[]string{"--mps", "0"}, "--mps 0: must be positive"},
		{[]string{"--pair", "0"}, "--pair 0: want 1..16777215"},
		{[]string{"--pair", "16777216"}, "--pair 16777216: want 1..16777215"},
		{[]string{"--seal-mode", "gmac"}, "--seal-mode gmac: --insecure-no-keys runs the pair unkeyed"},
		{[]string{"--key-generation", "0"}, "--key-generation 0: generations start at 1"},
		// Refused up front naming the flag (it failed at the start of
		// the device in nettlp's words, naming no flag).
		{[]string{"--mem-size", "0"}, "--mem-size 0: want above 0 bytes"},
		{[]string{"--mem-base", "0xffffffffff000000"}, "--mem-base 0xffffffffff000000 and --mem-size 64M: the memory wraps the 64-bit address space"},
	} {
		daemonUsageLine(t, c.want, append(unkeyed, c.args...)...)
	}
	daemonUsageLine(t, "--key-generation 0: generations start at 1", append(base, "--key-file", key, "--key-generation", "0")...)
}

// TestBridgeAgentFlags: the same for `dxpu bridge agent`, whose negative
// timers were replaced by defaults in silence; --ports takes the host's
// ports as the manager registers them (32..65536), not 1..32; --manager
// that is no URL is a usage error (exit 2, as ctl's), not exit 1; an
// --agent-listen address in use ends the agent in one line naming it,
// before it logs that it runs.
func TestBridgeAgentFlags(t *testing.T) {
	t.Parallel()
	cred := filepath.Join(t.TempDir(), "agent.cred")
	if err := os.WriteFile(cred, []byte("c0ffee\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := func(listen string, args ...string) []string {
		return append([]string{"bridge", "agent", "--role", "host", "--agent-listen", listen, "--insecure",
			"--agent-credential-file", cred, "--listen", "127.0.0.1:0"}, args...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keepalive", "-5ms"}, "--keepalive -5ms: must not be negative"},
		{[]string{"--dead-after", "0"}, "--dead-after 0s: must be positive"},
		{[]string{"--completion-timeout", "-1s"}, "--completion-timeout -1s: must not be negative"},
		{[]string{"--keepalive", "2s"}, "--dead-after 1s (the default) must exceed --keepalive 2s"},
		{[]string{"--keepalive", "2s", "--dead-after", "2s"}, "--dead-after 2s must exceed --keepalive 2s"},
		{[]string{"--ports", "0"}, "--ports 0: want 32..65536"},
		{[]string{"--ports", "31"}, "--ports 31: want 32..65536"},
		{[]string{"--ports", "65537"}, "--ports 65537: want 32..65536"},
		{[]string{"--mtu", "0"}, "--mtu 0: must be positive"},
		{[]string{"--mtu", "10"}, "--mtu 10: bridge: bad config: MTU: 10 cannot carry one"},
		{[]string{"--max-payload", "-4"}, `invalid argument "-4" for "--max-payload" flag: want a byte count like 64M, 4096 or 0x1000`},
		{[]string{"--memory-mb", "0"}, "--memory-mb 0: must be positive"},
		{[]string{"--manager", "notaurl"}, `--manager "notaurl": want an http(s) URL`},
	} {
		daemonUsageLine(t, c.want, agent("127.0.0.1:0", c.args...)...)
	}

	// A flag of the other role, or of a --pcie or --vm not given, was
	// taken and did nothing (third new-user trial: --role gpu --host-id
	// h1 --ports 64 ran); --mem-size 0 ran on 64M. Refused, naming the
	// flag, its value and what it is for.
	gpu := func(args ...string) []string {
		return append([]string{"bridge", "agent", "--role", "gpu", "--agent-listen", "127.0.0.1:0", "--insecure",
			"--agent-credential-file", cred, "--listen", "127.0.0.1:0"}, args...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{gpu("--host-id", "h1"), "--host-id h1 is for --role host, not --role gpu"},
		{gpu("--ports", "64"), "--ports 64 is for --role host, not --role gpu"},
		{gpu("--vm"), "--vm is for --role host, not --role gpu"},
		{gpu("--kernel", "/boot/vmlinuz"), "--kernel /boot/vmlinuz is for --role host, not --role gpu"},
		{gpu("--mem-size", "1M"), "--mem-size 1M is for --pcie memory, not --pcie emu-gpu"},
		{gpu("--pcie", "memory", "--mem-size", "0"), "--mem-size 0: want above 0 bytes"},
		{gpu("--pcie", "memory", "--mem-base", "0xffffffffff000000"), "--mem-base 0xffffffffff000000 and --mem-size 64M: the memory wraps the 64-bit address space"},
		{agent("127.0.0.1:0", "--pcie", "memory"), "--pcie memory is for --role gpu, not --role host"},
		{agent("127.0.0.1:0", "--box", "box.json"), "--box box.json is for --role gpu, not --role host"},
		{agent("127.0.0.1:0", "--mem-base", "0x1000"), "--mem-base 0x1000 is for --role gpu, not --role host"},
		{agent("127.0.0.1:0", "--accel", "tcg"), "--accel tcg is for --vm (the guest), not a host without --vm"},
	} {
		daemonUsageLine(t, c.want, c.args...)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	code, out, errs := daemonRunCode(t, agent(busy.Addr().String())...)
	if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "--agent-listen \""+busy.Addr().String()+"\"") {
		t.Errorf("--agent-listen in use: exit %d, stdout %q, stderr %q; want exit 1 and one line naming it", code, out, errs)
	}
}

// TestConformKitFlags: the kit's flags are checked up front, one line
// each, exit 2: a negative or zero timer, and a key flag without
// --key-file, were taken and the kit waited 10 s to say that nothing
// answered; a window or test target no PCIe request could address
// made the kit panic.
func TestConformKitFlags(t *testing.T) {
	t.Parallel()
	base := []string{"conform", "--role", "gpu", "--peer", "udp:127.0.0.1:9", "--local", "127.0.0.1:0"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keepalive", "-5ms"}, "--keepalive -5ms: must not be negative"},
		{[]string{"--dead-after", "0"}, "--dead-after 0s: must be positive"},
		{[]string{"--slack", "-1s"}, "--slack -1s: must not be negative"},
		{[]string{"--max-rto", "0"}, "--max-rto 0s: must be positive"},
		{[]string{"--completion-timeout", "-1ms"}, "--completion-timeout -1ms: must not be negative"},
		{[]string{"--mtu", "0"}, "--mtu 0: must be positive"},
		{[]string{"--size", "8"}, "--size 8: want a DW-aligned address and at least 64 bytes"},
		// These three panicked on the TLP the kit could not build, or
		// blamed the implementation for the wrong address.
		{[]string{"--addr", "0xffc", "--size", "64"}, "--addr 0xffc --size 64: the kit's requests reach 64 bytes into the window, which would cross a 4 KiB boundary"},
		{[]string{"--doorbell", "0x2000100005"}, "--doorbell 0x2000100005: want the test target's 64-byte aligned address"},
		{[]string{"--doorbell", "zz"}, `--doorbell "zz": want an address, like 0x2000100000`},
		{[]string{"--seal-mode", "foo"}, `--seal-mode "foo": want gcm or gmac`},
		{[]string{"--seal-mode", "gmac"}, "--seal-mode gmac without --key-file: the pair is unkeyed"},
		{[]string{"--rekey-after", "64"}, "--rekey-after 64 without --key-file"},
		{[]string{"--rekey-grace-time", "-1s"}, "--rekey-grace-time -1s: must not be negative"},
	} {
		daemonUsageLine(t, c.want, append(base, c.args...)...)
	}
}

// TestAddressInUseExitsOne: an address in use is the environment's
// failure, exit 1 in every daemon, as `dxpu bridge agent` had it
// (TestBridgeAgentFlags); `dxpu manager` and `dxpu switch` exited 2, as
// for a bad flag. One line on stderr naming the address, no result.
func TestAddressInUseExitsOne(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busyUDP.Close()
	tcp, udp := busy.Addr().String(), busyUDP.LocalAddr().String()
	table := "../../testdata/switch/corpus-table.json"
	for _, args := range [][]string{
		{"manager", "--no-auth", "--store", filepath.Join(t.TempDir(), "m.db"), "--listen", tcp},
		{"switch", "--mode", "udp", "--table", table, "--metrics", "", "--udp-listen", udp},
		{"switch", "--mode", "udp", "--table", table, "--udp-listen", "127.0.0.1:0", "--metrics", tcp},
	} {
		code, out, errs := daemonRunCode(t, args...)
		addr := args[len(args)-1]
		last := strings.TrimSpace(errs)
		last = last[strings.LastIndex(last, "\n")+1:]
		if code != 1 || out != "" || !strings.HasPrefix(last, "dxpu: ") || !strings.Contains(last, addr) || !strings.Contains(last, "address already in use") {
			t.Errorf("dxpu %s: exit %d, stdout %q, stderr %q; want exit 1 and a last line naming %s in use", strings.Join(args, " "), code, out, errs, addr)
		}
	}
}

// TestSwitchModeFlags: a flag given on the command line that the mode
// does not use is refused (exit 2, one line naming it and the mode); the
// switch ran without it (new-user trial). A default is not a flag given.
func TestSwitchModeFlags(t *testing.T) {
	t.Parallel()
	table := "../../testdata/switch/corpus-table.json"
	udp := []string{"switch", "--mode", "udp", "--table", table, "--udp-listen", "127.0.0.1:0", "--metrics", ""}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(udp, "--port", "eth0"), "dxpu: switch: --port does not apply to --mode udp (only to --mode xdp, afxdp, packet)"},
		{append(udp, "--max-pairs", "5"), "dxpu: switch: --max-pairs does not apply to --mode udp (only to --mode xdp)"},
		{append(udp, "--slow-path", "packet"), "dxpu: switch: --slow-path does not apply to --mode udp (only to --mode xdp)"},
		{[]string{"switch", "--mode", "packet", "--port", "lo", "--table", table, "--metrics", "", "--udp-listen", "127.0.0.1:0"},
			"dxpu: switch: --udp-listen does not apply to --mode packet (only to --mode udp)"},
		{[]string{"switch", "--mode", "afxdp", "--port", "lo", "--table", table, "--metrics", "", "--slow-path", "xsk"},
			"dxpu: switch: --slow-path does not apply to --mode afxdp (only to --mode xdp)"},
	} {
		daemonUsageLine(t, c.want, c.args...)
	}
}

// TestBridgeRoleFlags: a flag of `dxpu bridge` that the role (or, for
// --role gpu, the --pcie side) does not read is refused at start, exit 2,
// one line naming the flag, its value and what it is for, as bridge agent
// refuses them (agentRoleFlags): --role host --gpu-model a100 --mem-size
// 1G ran a host bridge that took them and did nothing. Defaults are not
// given; flags both roles read stay accepted.
func TestBridgeRoleFlags(t *testing.T) {
	t.Parallel()
	base := []string{"bridge", "--listen", "127.0.77.10:0", "--peer", "127.0.77.11:9", "--insecure-no-keys"}
	host := func(args ...string) []string {
		return append(append(append([]string(nil), base...), "--role", "host", "--pcie", "nettlp:127.0.77.2:127.0.77.1"), args...)
	}
	gpu := func(pcie string, args ...string) []string {
		return append(append(append([]string(nil), base...), "--role", "gpu", "--pcie", pcie), args...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{host("--gpu-model", "a100"), "dxpu: --gpu-model a100 is for --role gpu, not --role host"},
		{host("--mem-size", "1G"), "dxpu: --mem-size 1G is for --role gpu, not --role host"},
		{host("--mem-base", "0x1000"), "dxpu: --mem-base 0x1000 is for --role gpu, not --role host"},
		{host("--doorbell", "0x2000100000"), "dxpu: --doorbell 0x2000100000 is for --role gpu, not --role host"},
		{gpu("emu-gpu", "--mem-size", "1M"), "dxpu: --mem-size 1M is for --pcie memory, not --pcie emu-gpu"},
		{gpu("emu-gpu", "--doorbell", "0x2000100000"), "dxpu: --doorbell 0x2000100000 is for --pcie memory, not --pcie emu-gpu"},
		{gpu("memory", "--gpu-model", "a100"), "dxpu: --gpu-model a100 is for --pcie emu-gpu, not --pcie memory"},
		// Read by both roles, or checked elsewhere: still the same errors.
		{host("--mps", "512"), `dxpu: --mps shapes a memory device's completions (--pcie memory), not "nettlp"`},
		{host("--completion-timeout", "-1s"), "dxpu: --completion-timeout -1s: must not be negative"},
		{gpu("memory", "--mem-size", "0"), "dxpu: --mem-size 0: want above 0 bytes"},
	} {
		t.Run(strings.Join(c.args[len(base):], " "), func(t *testing.T) {
			t.Parallel()
			daemonUsageLine(t, c.want, c.args...)
		})
	}
}

// TestSwitchMaxPairs: --mode xdp --max-pairs 0 ran on the default
// table size, and one above xdp.MaxMaxPairs was refused only once the
// ports were set up: both are refused at start (exit 2, one line naming
// the flag and the range). The port does not exist, so no XDP program
// is attached if the check regresses.
func TestSwitchMaxPairs(t *testing.T) {
	t.Parallel()
	xdpArgs := []string{"switch", "--mode", "xdp", "--port", "dxpu-no-such-if", "--table", "../../testdata/switch/corpus-table.json", "--metrics", ""}
	for _, n := range []string{"0", "32768"} {
		daemonUsageLine(t, "dxpu: switch: --max-pairs "+n+": want 1..32767 pairs", append(xdpArgs, "--max-pairs", n)...)
	}
}

// TestSwitchManagerURL: a --manager that is no http(s) URL is refused at
// start (exit 2, one line); the switch retried it for ever, logging
// "unsupported protocol scheme" (new-user trial). Under daemonRunCode's
// deadline, so that a regression fails instead of hanging.
func TestSwitchManagerURL(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"notaurl", "127.0.0.1:7700", "ftp://m:7700", "http://127.0.0.1:7700,notaurl"} {
		daemonUsageLine(t, "switch: --manager ", "switch", "--mode", "udp", "--udp-listen", "127.0.0.1:0", "--metrics", "", "--manager", m)
	}
}
