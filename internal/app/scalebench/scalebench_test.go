package scalebench

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/privtest"
)

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 3, 3, 3}, 1},
		{[]float64{1, 0, 0, 0}, 0.25}, // one pair takes everything: 1/n
		{[]float64{1, 2}, 0.9},        // 9 / (2 * 5)
		{[]float64{2, 2, 0, 0}, 0.5},  // half the pairs starve
		{[]float64{5}, 1},
		{nil, 1},
		{[]float64{0, 0}, 1},
	} {
		if got := Jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestPlan: the scenarios and how each maps pairs onto hosts and boxes.
func TestPlan(t *testing.T) {
	o := Options{Loopback: true, Binary: os.Args[0]}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.MTU != 1472 || o.MPS != 256 {
		t.Errorf("sizes by default: --mtu %d --mps %d, want dxpu bridge's 1472 and 256", o.MTU, o.MPS)
	}
	var names []string
	for _, s := range o.plan() {
		names = append(names, s.name)
		hosts, boxes := map[int]int{}, map[int]int{}
		for i := range s.pairs {
			hosts[s.hostOf(i)]++
			boxes[s.boxOf(i)]++
		}
		if len(hosts) != s.hosts || len(boxes) != s.boxes {
			t.Errorf("%s: pairs on %d hosts and %d boxes, want %d and %d", s.name, len(hosts), len(boxes), s.hosts, s.boxes)
		}
		for b, n := range boxes {
			if n > 8 {
				t.Errorf("%s: box %d lends %d GPUs, more than a box's 8", s.name, b, n)
			}
		}
	}
	// No switch scenario on loopback.
	if got := strings.Join(names, ","); got != "pairs-1,pairs-2,pairs-4,pairs-8,pairs-16,pairs-32,borrow-8,borrow-32,lend-8" {
		t.Errorf("plan %s", got)
	}
	o.Loopback = false
	if p := o.plan(); p[len(p)-1].name != "switch-64" || p[len(p)-1].boxes != 8 {
		t.Errorf("namespaces: last scenario %+v, want switch-64 over 8 boxes", p[len(p)-1])
	}
	borrow := o.plan()[6]
	if borrow.name != "borrow-8" || borrow.hosts != 1 || borrow.boxes != 2 {
		t.Errorf("borrow-8: %+v, want 1 host, 2 boxes", borrow)
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
		ns   bool // in namespaces, not on loopback
	}{
		{Options{Scenarios: []string{"sweep", "fast"}}, `--scenarios "fast"`, false},
		{Options{Pairs: []int{2, 500}}, "500 pairs: want 1..120", false},
		{Options{Readers: 16}, "--readers 16: want 1..15", false},
		{Options{ReadBytes: 6}, "--read-bytes 6", false},
		{Options{Duration: -time.Second}, "--duration -1s", false},
		{Options{Duration: -5 * time.Microsecond}, "--duration -5us: must be positive", false},
		{Options{Binary: "/nonexistent/dxpu"}, "--bridge-binary /nonexistent/dxpu: no such file", false},
		{Options{Binary: "/etc/passwd"}, "--bridge-binary /etc/passwd: not an executable file", false},
		{Options{Binary: os.TempDir()}, "--bridge-binary " + os.TempDir() + ": a directory, not an executable file", false},
		{Options{MTU: 70000}, "--mtu 70000: want at most 65507", false},
		{Options{MTU: 8972}, "--mtu 8972: the namespaces' veths carry 1500-byte packets, so at most 1472", true},
		{Options{MPS: 384}, "--mps 384: want 128", false},
		{Options{MPS: 8192}, "--mps 8192", false},
	} {
		c.o.Loopback = !c.ns
		if c.o.Binary == "" {
			c.o.Binary = os.Args[0]
		}
		o := c.o
		err := o.defaults()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.o, err, c.want)
		}
		// Run refuses them before anything runs: a usage error.
		if _, err := Run(context.Background(), c.o); !errors.Is(err, apperr.ErrUsage) || errors.Is(err, apperr.ErrFailed) {
			t.Errorf("Run %+v: %v, want a usage error", c.o, err)
		}
	}
}

// TestBridgeBinaryDies: bridges that start and exit at once make a run
// that failed (exit status 1), not a usage error, in one line naming the
// binary, its exit status and its stderr's last line.
func TestBridgeBinaryDies(t *testing.T) {
	privtest.Loopback(t)
	script := filepath.Join(t.TempDir(), "bridge.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"bridge: cannot start: $2\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for bin, want := range map[string]string{
		"/bin/false": "side (/bin/false bridge) exited (exit status 1); its stderr: no output",
		script:       "side (" + script + " bridge) exited (exit status 3); its stderr: bridge: cannot start: --pair",
	} {
		_, err := Run(context.Background(), Options{Loopback: true, Binary: bin, Scenarios: []string{Sweep}, Pairs: []int{1},
			Duration: 50 * time.Millisecond, IdleSamples: 1})
		if !errors.Is(err, apperr.ErrFailed) || errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), want) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("--bridge-binary %s: %v (failed %v, usage %v), want a failed run in one line with %q", bin, err,
				errors.Is(err, apperr.ErrFailed), errors.Is(err, apperr.ErrUsage), want)
		}
	}
}

func TestStatCPU(t *testing.T) {
	// A command name with spaces and a ')' of its own; utime 250 and
	// stime 50 ticks.
	line := "4242 (a) b (c)) S 1 1 1 0 -1 4194304 99 0 0 0 250 50 0 0 20 0 1 0 1196354 3133440 414\n"
	if got := statCPU(line); got != 3*time.Second {
		t.Errorf("statCPU = %v, want 3s", got)
	}
	for _, bad := range []string{"", "4242 (a) S 1 2", "4242 (a) S 1 1 1 0 -1 4 9 0 0 0 x 50 0"} {
		if got := statCPU(bad); got != 0 {
			t.Errorf("statCPU(%q) = %v, want 0", bad, got)
		}
	}
	if got := procCPU(-1); got != 0 {
		t.Errorf("procCPU of no process = %v", got)
	}
}

func TestSwitchDrops(t *testing.T) {
	m := map[string]float64{
		`dxpu_switch_pair_packets_total{pair="1",reason="to_gpu"}`:     100,
		`dxpu_switch_pair_packets_total{pair="1",reason="tx_to_gpu"}`:  97,
		`dxpu_switch_pair_packets_total{pair="2",reason="to_host"}`:    50,
		`dxpu_switch_pair_packets_total{pair="2",reason="tx_to_host"}`: 50,
		`dxpu_switch_pair_packets_total{pair="2",reason="spoofed"}`:    4,
		`dxpu_switch_pair_bytes_total{pair="2",reason="spoofed"}`:      400,
		`dxpu_switch_port_packets_total{port="s-host",reason="fault"}`: 9,
	}
	if got := switchDrops(m); got != 7 {
		t.Errorf("drops %d, want 7 (3 forwarded and not sent, 4 spoofed; bytes and ports not counted)", got)
	}
	// A switch that does not count transmissions: forwarded is not a drop.
	if got := switchDrops(map[string]float64{`dxpu_switch_pair_packets_total{pair="1",reason="to_gpu"}`: 10}); got != 0 {
		t.Errorf("drops %d without tx counters, want 0", got)
	}
}

func TestTailBuffer(t *testing.T) {
	var b tailBuffer
	if got := b.lastLine(); got != "no output" {
		t.Errorf("empty: %q", got)
	}
	b.Write([]byte(strings.Repeat("x", 5000) + "\nfirst\n"))
	b.Write([]byte("bridge: bind: address in use\n\n"))
	if got := b.lastLine(); got != "bridge: bind: address in use" {
		t.Errorf("last line %q", got)
	}
	if len(b.b) > tailMax {
		t.Errorf("kept %d bytes, more than %d", len(b.b), tailMax)
	}
}
