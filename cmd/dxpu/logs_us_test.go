package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestLogsWriteUs: what the commands write spells durations as `dxpu help
// units` does, never Go's µs: a duration attribute through the logger
// every command gets (the switch's retry_in, the bridge's late), the
// events of a `dxpu bridge` pair (link-up at 965.648us, and a link-down's
// "peer silent for 812us", as a process logs them), the reports of bench
// link, demo and conform, and errors that echo a duration flag.
func TestLogsWriteUs(t *testing.T) {
	t.Parallel()
	t.Run("logger", func(t *testing.T) {
		t.Parallel()
		var stderr strings.Builder
		e := newEnv(strings.NewReader(""), &strings.Builder{}, &stderr, nil, noEnv)
		e.log.Warn("retrying", "retry_in", 5*time.Microsecond, slog.Duration("late", 1500*time.Microsecond))
		if got := stderr.String(); !strings.Contains(got, "retry_in=5us late=1.5ms") || strings.Contains(got, "µ") {
			t.Errorf("the commands' logger wrote %q, want retry_in=5us late=1.5ms", got)
		}
	})
	t.Run("bridge events", func(t *testing.T) {
		t.Parallel()
		// Timers under a millisecond, so that the silence a link-down
		// names is in microseconds (the pair may also flap on a loaded
		// machine: those events are checked the same).
		timers := []string{"--keepalive", "100us", "--dead-after", "400us"}
		ports := freePorts(t, "udp", 2)
		hostUDP, gpuUDP := fmt.Sprintf("127.0.46.12:%d", ports[0]), fmt.Sprintf("127.0.46.13:%d", ports[1])
		_, gpuLog := daemon(t, append([]string{"bridge", "--role", "gpu", "--pair", "6", "--listen", gpuUDP, "--peer", hostUDP,
			"--pcie", "memory", "--insecure-no-keys"}, timers...)...)
		waitfor.Until(t, "the GPU side running", func() bool { return strings.Contains(gpuLog.String(), "bridge running") })
		host, hostLog := daemon(t, append([]string{"bridge", "--role", "host", "--pair", "6", "--listen", hostUDP, "--peer", gpuUDP,
			"--pcie", "nettlp:127.0.46.5:127.0.46.6", "--insecure-no-keys"}, timers...)...)
		waitfor.Until(t, "both sides' link-up events", func() bool {
			return strings.Contains(gpuLog.String(), "link-up at") && strings.Contains(hostLog.String(), "link-up at")
		})
		// The host side stopped: the GPU side's link goes down, the
		// reason naming how long the host was silent.
		if err := host.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitfor.Until(t, "the GPU side's link-down event", func() bool { return strings.Contains(gpuLog.String(), "peer silent for") })
		up := regexp.MustCompile(`event="link-up at [0-9.]+(ns|us|ms|s) session 0x[0-9a-f]+"`)
		down := regexp.MustCompile(`event="link-down at [0-9.]+(ns|us|ms|s): peer silent for [0-9.]+(ns|us|ms|s)"`)
		for side, log := range map[string]string{"gpu": gpuLog.String(), "host": hostLog.String()} {
			if !up.MatchString(log) || strings.Contains(log, "µ") {
				t.Errorf("the %s side's log, want its link-up event as %s and no µs:\n%s", side, up, log)
			}
		}
		if log := gpuLog.String(); !down.MatchString(log) {
			t.Errorf("the GPU side's log, want its link-down event as %s:\n%s", down, log)
		} else {
			t.Log(down.FindString(log))
		}
	})
	t.Run("reports", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"bench", "link", "--virtual"},
			{"bench", "link", "--virtual", "--json", "--delay", "5us", "--loss", "0.01"},
			{"demo", "--json"},
		} {
			out, stderr, err := runDxpu(t, "", args...)
			if err != nil || out == "" || strings.Contains(out+stderr, "µ") {
				t.Errorf("dxpu %s: %v, want a report and no µs:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		pcap := filepath.Join(t.TempDir(), "x.pcap")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"bench", "link", "--virtual", "--delay", "-5us"}, "--delay -5us: want 0 up to 1s"},
			{[]string{"bench", "link", "--virtual", "--duration", "-7us"}, "--duration -7us: must be positive"},
			{[]string{"bench", "link", "--virtual", "--interval", "-3us"}, "--interval -3us: must be positive"},
			{[]string{"bench", "link", "--raw-for", "-3us"}, "--raw-for -3us: must not be negative"},
			{[]string{"bench", "link", "--virtual", "--duration", "3s", "--interval", "1us"}, "3s / 1us = 3000000 TLPs"},
			{[]string{"demo", "--rtt", "-5us"}, "--rtt -5us: must not be negative"},
			{[]string{"bench", "e2e", "--loopback", "--spin", "-5us"}, "--spin -5us: must not be negative"},
			{[]string{"bench", "scale", "--loopback", "--duration", "-5us"}, "--duration -5us: must be positive"},
			{[]string{"bridge", "--role", "gpu", "--pair", "1", "--listen", "127.0.0.1:0", "--peer", "127.0.0.1:9", "--pcie", "memory",
				"--insecure-no-keys", "--dead-after", "4us", "--keepalive", "5us"}, "--dead-after 4us must exceed --keepalive 5us"},
			{[]string{"chaos", "--duration", "5us"}, "--duration 5us: want at least 5s"},
			{[]string{"manager", "--degraded-after", "-5us"}, "--degraded-after -5us: must be positive"},
			{[]string{"manager", "--unreachable-after", "-5us"}, "--unreachable-after -5us: must be positive"},
			{[]string{"pcap", "capture", "--interface", "lo", "--out", pcap, "--duration", "-5us"}, "capture: --duration -5us: want 0"},
		} {
			_, _, err := runDxpu(t, "", c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "µ") {
				t.Errorf("dxpu %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
			}
		}
	})
	t.Run("conform", func(t *testing.T) {
		t.Parallel()
		ports := freePorts(t, "udp", 2)
		iut, kit := fmt.Sprintf("127.0.46.14:%d", ports[0]), fmt.Sprintf("127.0.46.15:%d", ports[1])
		_, log := daemon(t, "bridge", "--role", "gpu", "--pair", "1", "--listen", iut, "--peer", kit, "--pcie", "memory", "--insecure-no-keys")
		waitfor.Until(t, "the bridge running", func() bool { return strings.Contains(log.String(), "bridge running") })
		// Its rules are not judged here (a loaded machine may fail the
		// real-time ones, TestConformDaemon's business): only its words.
		args := append([]string{"conform", "--role", "gpu", "--addr", "0x2000000000", "--peer", "udp:" + iut, "--local", kit}, daemonTimers("gpu")...)
		out, stderr, err := runDxpu(t, "", args...)
		if !summaryLine.MatchString(out) && err == nil || strings.Contains(out+stderr, "µ") || err != nil && strings.Contains(err.Error(), "µ") {
			t.Errorf("dxpu %s: %v, want a report or an error, and no µs:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr)
		}
		if strings.Contains(log.String(), "µ") {
			t.Errorf("the bridge's log spells µs:\n%s", log)
		}
	})
}
