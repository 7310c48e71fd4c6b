package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestBenchProbabilityAndRateFlags: a probability flag that is NaN or out
// of 0..1, and a rate that is NaN or infinite, are refused up front in one
// line naming the flag and its value, exit 2, nothing on stdout. (model's
// and bench fabric's --link-gbps already refuse NaN and ±Inf:
// model_cmd_test.go.)
func TestBenchProbabilityAndRateFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, want string }{
		{"bench link --virtual --loss NaN", "--loss NaN: want a probability from 0 to 1"},
		{"bench link --virtual --dup NaN", "--dup NaN: want a probability from 0 to 1"},
		{"bench link --virtual --corrupt NaN", "--corrupt NaN: want a probability from 0 to 1"},
		{"bench link --virtual --reorder NaN", "--reorder NaN: want a probability from 0 to 1"},
		{"bench link --virtual --loss 1.5", "--loss 1.5: want a probability from 0 to 1"},
		{"bench link --virtual --link-gbps NaN", "--link-gbps NaN: want a finite rate"},
		{"bench link --virtual --link-gbps +Inf", "--link-gbps +Inf: want a finite rate"},
		{"bench fabric --bridge --loss NaN", "--loss NaN: want a probability from 0 to 1"},
		{"vm demo --loss NaN", "--loss NaN: want a probability from 0 to 1"},
		{"vm demo --loss 1", "--loss 1: want a probability from 0 to below 1"},
	} {
		checkUsageError(t, strings.Fields(c.args), c.want)
	}
}

// TestBenchLinkDelayBound: --delay is at most a second.
func TestBenchLinkDelayBound(t *testing.T) {
	t.Parallel()
	checkUsageError(t, []string{"bench", "link", "--virtual", "--delay", "100h"}, "--delay 100h0m0s: want 0 up to 1s")
	checkUsageError(t, []string{"bench", "link", "--virtual", "--delay", "-1ms"}, "--delay -1ms: want 0 up to 1s")
}

// TestBenchLinkVirtualLongDelay: a virtual run whose delay (5ms) outlasts
// its issuing (2ms) drains what is in flight before judging: nothing is
// counted lost and it exits 0.
func TestBenchLinkVirtualLongDelay(t *testing.T) {
	t.Parallel()
	out, errOut, err := runDxpu(t, "", "bench", "link", "--virtual", "--delay", "5ms")
	if err != nil || !strings.Contains(out, " lost 0 ") {
		t.Fatalf("bench link --virtual --delay 5ms: %v\n%s%s", err, out, errOut)
	}
}

// TestBenchSwitchDuration: --duration 0 or below is refused, as bench
// link refuses it.
func TestBenchSwitchDuration(t *testing.T) {
	t.Parallel()
	checkUsageError(t, []string{"bench", "switch", "--duration", "-1s"}, "--duration -1s: must be positive")
	checkUsageError(t, []string{"bench", "switch", "--duration", "0"}, "--duration 0s: must be positive")
}

// TestNettlpServeFlags: --tag-ports outside 1..16 (0 included) and
// --mem-size 0 are refused naming the flag.
func TestNettlpServeFlags(t *testing.T) {
	t.Parallel()
	checkUsageError(t, []string{"nettlp", "serve", "--addr", "127.0.3.9", "--tag-ports", "0"}, "--tag-ports 0: want 1..16")
	checkUsageError(t, []string{"nettlp", "serve", "--addr", "127.0.3.9", "--tag-ports", "17"}, "--tag-ports 17: want 1..16")
	checkUsageError(t, []string{"nettlp", "serve", "--addr", "127.0.3.9", "--mem-size", "0"}, "--mem-size 0: want above 0")
}

// TestBenchLinkRefusesUpFront: what a run's bridges or requester could
// not take is refused before anything runs (the first UDP flood
// included), one line naming the flag: a write smaller than its number
// and time (--virtual panicked on 4 bytes) or above the MPS (--virtual
// dropped every write), NaN, infinite or overflowing mix weights (a run
// issued no writes), a window or MTU the bridges refuse, an MTU no UDP
// datagram holds, a seal mode without --keys or unknown.
func TestBenchLinkRefusesUpFront(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, want string }{
		{"bench link --virtual --write-size 4 --duration 100us", "--write-size 4: want a multiple of 4 in 16..512 bytes"},
		{"bench link --virtual --write-size 516", "--write-size 516: want a multiple of 4 in 16..512 bytes"},
		{"bench link --write-size 1024", "--write-size 1024: want a multiple of 4 in 16..512 bytes"},
		{"bench link --mix write=NaN", `--mix: "write=NaN": want name=weight with a weight from 0 to 1000000`},
		{"bench link --virtual --mix write=Inf,read=1", `--mix: "write=Inf"`},
		{"bench link --mix read=1e308,write=1e308", `--mix: "read=1e308"`},
		{"bench link --window 100000000", "--window 100000000: want 1..32768 TLPs"},
		{"bench link --mtu 128", "--mtu 128: cannot carry one 532-byte TLP (need 574..65535)"},
		{"bench link --keys --mtu 560", "--mtu 560: cannot carry one 532-byte TLP (need 602..65535)"},
		{"bench link --mtu 65535", "--mtu 65535: a real-time run sends its frames in UDP datagrams, at most 65507 bytes"},
		{"bench link --seal-mode gmac", "--seal-mode needs --keys"},
		{"bench link --keys --seal-mode foo", `--seal-mode "foo": want gcm or gmac`},
		{"bench link --virtual --raw-for 1s", "--raw-for: no raw baseline runs with --virtual or --raw=false"},
		{"bench link --raw=false --raw-for 1s", "--raw-for: no raw baseline runs"},
	} {
		checkUsageError(t, strings.Fields(c.args), c.want)
	}
}

// TestBenchEmptyFlagsRefused: a list or size flag typed with an empty
// value is refused instead of running the default (`bench scale --pairs ""`
// ran the whole sweep of 64 bridge processes, `bench e2e --sizes ""` every
// size, `--mtu 0` the default MTU).
func TestBenchEmptyFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "e2e", "--loopback", "--sizes", ""}, `--sizes "": empty; leave the flag out for its default`},
		{[]string{"bench", "e2e", "--loopback", "--mtu", "0"}, "--mtu 0: leave the flag out for its default"},
		{[]string{"bench", "scale", "--loopback", "--pairs", ""}, `--pairs "": empty`},
		{[]string{"bench", "scale", "--loopback", "--borrow", " "}, `--borrow " ": empty`},
		{[]string{"bench", "scale", "--loopback", "--scenarios", ""}, `--scenarios "": empty`},
	} {
		checkUsageError(t, c.args, c.want)
	}
}

// TestBenchCopySizesWholeDWs: bench fabric holds --sizes to bench e2e's
// rule, whole DWs (a multiple of 4), with the same one-line message
// naming the size (`bench fabric --sizes 3` ran and reported 3-byte
// copies), each with its own upper bound.
func TestBenchCopySizesWholeDWs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, want string }{
		{"bench fabric --sizes 3", "--sizes: copy size 3: want a multiple of 4 in 4..4GiB"},
		{"bench fabric --sizes 4K,4098", "--sizes: copy size 4098: want a multiple of 4 in 4..4GiB"},
		{"bench fabric --sizes 8G", "--sizes: copy size 8G: want a multiple of 4 in 4..4GiB"},
		{"bench fabric --sizes 4K,x", `--sizes "x": want a byte count like 64M, 4096 or 0x1000`},
		{"bench e2e --loopback --sizes 3", "--sizes: copy size 3: want a multiple of 4 in 4..1GiB"},
		{"bench e2e --loopback --sizes 2G", "--sizes: copy size 2G: want a multiple of 4 in 4..1GiB"},
	} {
		checkUsageError(t, strings.Fields(c.args), c.want)
	}
	checkUsageError(t, []string{"bench", "fabric", "--sizes", ""}, `--sizes "": empty; leave the flag out for its default`)
	out, _, err := runDxpu(t, "", "bench", "fabric", "--sizes", "4,0x1000", "--json")
	if err != nil || !strings.Contains(out, `"bytes": 4,`) || !strings.Contains(out, `"bytes": 4096,`) {
		t.Errorf("bench fabric --sizes 4,0x1000: %v, want copies of 4 and 4096 bytes:\n%s", err, out)
	}
}

// TestBenchFabricExtremes: every RTT the checks accept runs (from 50ms
// enumeration timed out and found no GPU), a rate or a loss the run could
// not end with is refused naming the flag and the limit, and the header
// gives the rate as given.
func TestBenchFabricExtremes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--rtt", "100ms"}, {"--rtt", "1s"}, {"--bridge", "--rtt", "1s"}, {"--link-gbps", "0.001"}, {"--bridge", "--loss", "0.5"},
	} {
		out, errOut, err := runDxpu(t, "", append([]string{"bench", "fabric", "--sizes", "4K"}, args...)...)
		if err != nil || !strings.Contains(out, "MMIO read") {
			t.Errorf("bench fabric %v: %v\n%s%s", args, err, out, errOut)
		}
	}
	checkUsageError(t, []string{"bench", "fabric", "--link-gbps", "1e-9"}, "--link-gbps 1e-09: want a number of Gbit/s from 0.001 up to 10000")
	checkUsageError(t, []string{"bench", "fabric", "--bridge", "--loss", "0.9"}, "--loss 0.9: want at most 0.5")
	out, _, err := runDxpu(t, "", "bench", "fabric", "--sizes", "4K", "--link-gbps", "0.1")
	if err != nil || !strings.Contains(out, ", 0.1 Gbit/s, ") {
		t.Errorf("bench fabric --link-gbps 0.1: %v, header not 0.1 Gbit/s:\n%s", err, out)
	}
}

// TestBenchManagerFlags: an explicit 0 is refused, not read as the
// default; etcd endpoints are checked up front (notaurl waited 5s for
// "context deadline exceeded"); a flag the chosen store ignores is
// refused. All before anything runs.
func TestBenchManagerFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, want string }{
		{"--gpus 0", "--gpus 0: want a multiple of 8 in 8..1000000"},
		{"--gpus 7", "--gpus 7: want a multiple of 8 in 8..1000000"},
		{"--hosts 0", "--hosts 0: want 1..100000"},
		{"--clients 0", "--clients 0: want 1..10000"},
		{"--duration 0", "--duration 0s: must be positive"},
		{"--duration -1s", "--duration -1s: must be positive"},
		{"--seed 0", "--seed 0: want 1 or above"},
		{"--store etcd --etcd-endpoints notaurl", `--etcd-endpoints "notaurl": want http:// or https:// URLs with a host and port`},
		{"--store etcd --etcd-endpoints http://127.0.0.1", `--etcd-endpoints "http://127.0.0.1": want http:// or https:// URLs with a host and port`},
		{"--store etcd --etcd-endpoints http://127.0.0.1:2379,", `--etcd-endpoints "": want http:// or https://`},
		{"--store etcd --etcd-endpoints http://127.0.0.1:99999", `--etcd-endpoints "http://127.0.0.1:99999": port 99999: want 1..65535`},
		{"--store memory --dir /tmp", "--dir: only with --store bbolt, not memory"},
		{"--store etcd --dir /tmp", "--dir: only with --store bbolt, not etcd"},
		{"--store memory --etcd-endpoints http://127.0.0.1:2379", "--etcd-endpoints: only with --store etcd, not memory"},
		{"--etcd-endpoints http://127.0.0.1:2379", "--etcd-endpoints: only with --store etcd, not bbolt"},
	} {
		checkUsageError(t, append([]string{"bench", "manager"}, strings.Fields(c.args)...), c.want)
	}
}

// TestBenchSwitchFlags: --frame-bytes outside what the benchmark can send
// (the headers and one TLP of whole DWs, within the veths' 1500-byte MTU)
// is refused, and --repeat and --rounds are named apart, with the value.
func TestBenchSwitchFlags(t *testing.T) {
	t.Parallel()
	for _, fb := range []string{"0", "10", "64", "130", "1516", "100000"} {
		checkUsageError(t, []string{"bench", "switch", "--no-xdp", "--frame-bytes", fb}, "--frame-bytes "+fb+": want a multiple of 4 in 68..1512")
	}
	checkUsageError(t, []string{"bench", "switch", "--no-xdp", "--frame-bytes", "-1"}, `invalid argument "-1" for "--frame-bytes" flag: want a byte count`)
	checkUsageError(t, []string{"bench", "switch", "--no-xdp", "--repeat", "0"}, "--repeat 0: must be positive")
	checkUsageError(t, []string{"bench", "switch", "--no-xdp", "--rounds", "0"}, "--rounds 0: must be positive")
	checkUsageError(t, []string{"bench", "switch", "--no-xdp", "--rounds", "-3"}, "--rounds -3: must be positive")
}

// TestBenchLinkSharedSocket: --shared-socket runs the pair as an agent
// runs its pairs, each bridge on a data-plane socket shared by pairs: the
// run keeps every invariant, says so in the result (shared_socket, and on
// Linux pair_steered: the kernel steered the pair to a socket of its own)
// and moves data; with --virtual, or an --mtu the agent refuses, it is
// refused, naming the flag.
func TestBenchLinkSharedSocket(t *testing.T) {
	t.Parallel()
	out, errOut, err := runDxpu(t, "", "bench", "link", "--shared-socket", "--duration", "200ms", "--raw=false", "--json")
	if err != nil {
		t.Fatalf("bench link --shared-socket: %v\n%s%s", err, out, errOut)
	}
	var r struct {
		SharedSocket bool    `json:"shared_socket"`
		Steered      bool    `json:"pair_steered"`
		Goodput      float64 `json:"goodput_gbps"`
		Delivered    int     `json:"delivered"`
		Lost         int     `json:"lost"`
		Completed    int     `json:"reads_completed"`
		Unanswered   int     `json:"unanswered"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !r.SharedSocket || r.Goodput <= 0 || r.Delivered == 0 || r.Completed == 0 || r.Lost != 0 || r.Unanswered != 0 ||
		runtime.GOOS == "linux" && !r.Steered {
		t.Fatalf("bench link --shared-socket: %+v", r)
	}
	checkUsageError(t, []string{"bench", "link", "--virtual", "--shared-socket"}, "--shared-socket is a real socket: not with --virtual")
	checkUsageError(t, []string{"bench", "link", "--shared-socket", "--mtu", "9217"}, "--mtu 9217: with --shared-socket want at most 9216")
}

// TestBenchLinkPairNeverUp: with every frame lost the pair never comes
// up: bench link ends with one line naming it and the faults, and prints
// no result. (It hung: the runners were waited for before they were
// cancelled.)
func TestBenchLinkPairNeverUp(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "bench", "link", "--loss", "1", "--duration", "200ms", "--raw=false", "--json")
	if err == nil || out != "" {
		t.Fatalf("bench link --loss 1: err %v, stdout %q", err, out)
	}
	if want := "did not come up within 3 s: the faults injected"; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q, want one line with %q", err, want)
	}
}
