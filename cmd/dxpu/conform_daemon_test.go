package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
)

// daemonTimers are dxpu bridge's defaults for role as the kit's flags
// give them, with a slack for a loaded machine: beside CPU hogs a daemon
// was seen silent for up to 285 ms over its 50 ms keepalive (LNK-1), more
// often in the keyed runs, which last longer. The completion timeout is
// the role's: 250 ms on the host side, twice --dead-after on the GPU side.
func daemonTimers(role string) []string {
	cto := "250ms"
	if role == "gpu" {
		cto = "2s"
	}
	return []string{"--keepalive", "50ms", "--dead-after", "1s", "--completion-timeout", cto, "--max-rto", "200ms", "--slack", "250ms"}
}

// TestConformDaemon runs the kit against the shipped `dxpu bridge` process
// in both roles, unkeyed and keyed (GCM for the GPU side, GMAC for the
// host side), over loopback UDP and over raw Ethernet (a veth pair, as
// root; the daemon on AF_PACKET, and on AF_XDP once per role): no rule fails, and keyed, KEY-2..KEY-7 pass (KEY-8 needs a
// second key the daemon cannot be given). Not parallel: the daemon and
// the kit keep real-time bounds.
func TestConformDaemon(t *testing.T) {
	privtest.Loopback(t)
	dir, err := dxpuBin()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dxpu")
	defer func() {
		if l, err := netlink.LinkByName(vethKit); err == nil {
			_ = netlink.LinkDel(l)
		}
	}()
	key := filepath.Join(t.TempDir(), "pair.key")
	if err := os.WriteFile(key, []byte(hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type kase struct {
		role  string
		keyed []string
		ether bool
		afxdp bool // the daemon's --ether-driver afxdp
	}
	var cases []kase
	for _, ether := range []bool{false, true} {
		cases = append(cases, kase{"gpu", nil, ether, false}, kase{"gpu", []string{"--key-file", key, "--seal-mode", "gcm"}, ether, false},
			kase{"host", nil, ether, false}, kase{"host", []string{"--key-file", key, "--seal-mode", "gmac", "--key-generation", "7"}, ether, false})
	}
	cases = append(cases, kase{"gpu", nil, true, true}, kase{"host", []string{"--key-file", key, "--seal-mode", "gmac", "--key-generation", "7"}, true, true})
	var kitMAC, iutMAC string
	for i, c := range cases {
		name := c.role + "-unkeyed"
		if c.keyed != nil {
			name = c.role + "-keyed"
		}
		if c.ether {
			name += "-ether"
		}
		if c.afxdp {
			name += "-afxdp"
		}
		t.Run(name, func(t *testing.T) {
			if c.ether && kitMAC == "" {
				kitMAC, iutMAC = vethPair(t)
			}
			// Addresses of its own per case: a daemon of the previous one
			// may still be closing its socket.
			ip := func(n int) string { return fmt.Sprintf("127.0.%d.%d", 40+i, n) }
			daemonKeys := c.keyed
			if daemonKeys == nil {
				daemonKeys = []string{"--insecure-no-keys"}
			}
			var daemonLog syncbuf.Buffer // the daemons' stderr: their late timers
			fabric := []string{"--listen", ip(1) + ":8855", "--peer", ip(2) + ":8855"}
			kitPeer := []string{"--peer", "udp:" + ip(1) + ":8855", "--local", ip(2) + ":8855"}
			if c.ether {
				fabric = []string{"--ether", vethIUT + ":" + kitMAC}
				if c.afxdp {
					fabric = append(fabric, "--ether-driver", "afxdp")
				}
				kitPeer = []string{"--peer", "eth:" + vethKit + ":" + iutMAC}
			}
			addr := "0x2000000000"
			if c.role == "host" {
				addr = "0"
			}
			// startDaemons starts the implementation under test; stop
			// kills it and waits until it is gone.
			startDaemons := func() (stop func()) {
				var cmds []*exec.Cmd
				start := func(args ...string) {
					cmd := exec.Command(bin, args...)
					cmd.Stderr = &daemonLog
					if err := childproc.Start(cmd, nil); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
					cmds = append(cmds, cmd)
				}
				if c.role == "gpu" {
					start(append(append([]string{"bridge", "--role", "gpu", "--pcie", "memory"}, fabric...), daemonKeys...)...)
				} else {
					start("nettlp", "serve", "--addr", ip(4), "--mem-size", "1M")
					start(append(append([]string{"bridge", "--role", "host", "--pcie", "nettlp:" + ip(3) + ":" + ip(5) + ":" + ip(4)}, fabric...), daemonKeys...)...)
				}
				return func() {
					for _, cmd := range cmds {
						_ = cmd.Process.Kill()
						_ = cmd.Wait()
					}
				}
			}
			ctx := t.Context()
			stop := startDaemons()
			args := append(append([]string{"conform", "--role", c.role, "--addr", addr}, kitPeer...), daemonTimers(c.role)...)
			args = append(args, c.keyed...)
			// A run that failed only rules bounding how soon the daemon
			// answers, while the daemon logged its own timer late (a
			// loaded machine did not run it: 250-700 ms seen), judged the
			// machine: the kit runs again, twice at most, against daemons
			// started afresh. (Against the same daemons, a RESET for the
			// last run's session, sent once the daemon found that kit
			// gone, reached the next kit, which failed CTL-4: a session
			// none of its own.) Without the daemon's word it fails at
			// once.
			var out string
			for try := 1; ; try++ {
				var stdout, stderr strings.Builder
				logFrom := daemonLog.Len()
				kit := exec.CommandContext(ctx, bin, args...)
				kit.Stdout, kit.Stderr = &stdout, &stderr
				err := kit.Run()
				out = stdout.String()
				if late := daemonLog.String()[logFrom:]; err != nil && try < 3 && daemonStarved(out, late) {
					t.Logf("run %d: the daemon was not running:\n%s\n%s", try, strings.Join(starved.FindAllString(out, -1), "\n"), late)
					stop()
					stop = startDaemons()
					continue
				}
				if err != nil {
					t.Fatalf("dxpu %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
				}
				break
			}
			m := summaryLine.FindStringSubmatch(out)
			if m == nil || m[2] != "0" || m[4] != c.role {
				t.Fatalf("no summary with 0 failures for the %s side:\n%s", c.role, out)
			}
			for _, id := range []string{"KEY-2", "KEY-3", "KEY-4", "KEY-5", "KEY-6", "KEY-7"} {
				want := "pass"
				if c.keyed == nil {
					want = "n/a"
				}
				if !regexp.MustCompile(`(?m)^` + id + `\s+` + regexp.QuoteMeta(want) + `\s`).MatchString(out) {
					t.Errorf("%s: want %s\n%s", id, want, out)
				}
			}
			t.Log(m[0])
		})
	}
}

// starved matches the report lines of the rules that bound how soon an
// implementation answers (internal/app/conform's schedulingRules); failed
// any failed rule's.
var (
	starved = regexp.MustCompile(`(?m)^(LNK-1|ACK-5|CTL-3|NAK-1|NAK-2)\s+fail\s.*$`)
	failed  = regexp.MustCompile(`(?m)^\S+\s+fail\s.*$`)
)

// lateLine starts the line `dxpu bridge` logs when its timer ran late:
// the process was not running when its frames were due.
const lateLine = "bridge timer late"

// daemonStarved reports whether a kit report failed rules, all of them
// ones that bound how soon the implementation answers, while the daemon's
// log of the same run says its timer ran late: the machine did not run it.
func daemonStarved(report, daemonLog string) bool {
	f := failed.FindAllString(report, -1)
	return len(f) > 0 && len(f) == len(starved.FindAllString(report, -1)) && strings.Contains(daemonLog, lateLine)
}

// The veth pair of the raw Ethernet runs: the kit's end and the daemon's.
const (
	vethKit = "dxkit0"
	vethIUT = "dxiut0"
)

// vethPair makes the veth pair (root only, through privtest) and returns
// the MACs of the kit's end and the daemon's; it is deleted after t's
// parent test.
func vethPair(t *testing.T) (kit, iut string) {
	privtest.NetNS(t)
	if l, err := netlink.LinkByName(vethKit); err == nil {
		_ = netlink.LinkDel(l) // left by a killed run
	}
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: vethKit}, PeerName: vethIUT}); err != nil {
		t.Fatalf("veth: %v", err)
	}
	var macs [2]string
	for i, name := range []string{vethKit, vethIUT} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		macs[i] = l.Attrs().HardwareAddr.String()
	}
	return macs[0], macs[1]
}

// A kit run counts as the machine's fault only when it failed nothing but
// rules bounding how soon the daemon answers and the daemon, in the same
// run, logged its timer late.
func TestDaemonNotRunning(t *testing.T) {
	t.Parallel()
	prev := "KEY-2   pass start: sealed\n58 pass, 0 fail, 23 n/a against udp:127.0.0.22:8855 (host side) in 17s, seed 1\n"
	late := "time=2026-12-05T14:02:26.882Z level=WARN msg=\"" + lateLine + ": the process was not running\" pair=1 role=host late=288.5ms\n"
	lnk := "LNK-1   fail keys: silent for 338.177ms while up, between a KEEPALIVE and a KEEPALIVE (Keepalive 50ms, slack 200ms)\n"
	key := "KEY-3   fail keys: a replayed KEEPALIVE was answered\n"
	sum := "58 pass, 1 fail, 23 n/a against udp:127.0.0.32:8855 (host side) in 17.88s, seed 2\n"
	for _, c := range []struct {
		name, out string
		want      bool
	}{
		{"LNK-1 and the daemon late", prev + late + lnk + sum, true},
		{"LNK-1 alone", prev + lnk + sum, false},
		{"another rule failed too", prev + late + lnk + key + sum, false},
		{"late only in an earlier run", late + prev + lnk + sum, false},
		{"nothing failed", prev + late + sum, false},
	} {
		if got := daemonNotRunning(c.out); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
