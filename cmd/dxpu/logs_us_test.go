package main

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestLogsWriteUs: the daemons' logs spell durations as `dxpu help units`
// does, never Go's µs: a duration attribute through the logger every
// command gets (the switch's retry_in, the bridge's late), and the events
// of a `dxpu bridge` pair (link-up at 965.648us, as a process logs it).
func TestLogsWriteUs(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	e := newEnv(strings.NewReader(""), &strings.Builder{}, &stderr, nil, noEnv)
	e.log.Warn("retrying", "retry_in", 5*time.Microsecond, slog.Duration("late", 1500*time.Microsecond))
	if got := stderr.String(); !strings.Contains(got, "retry_in=5us late=1.5ms") || strings.Contains(got, "µ") {
		t.Errorf("the commands' logger wrote %q, want retry_in=5us late=1.5ms", got)
	}

	ports := freePorts(t, "udp", 2)
	hostUDP, gpuUDP := fmt.Sprintf("127.0.46.12:%d", ports[0]), fmt.Sprintf("127.0.46.13:%d", ports[1])
	_, gpuLog := daemon(t, "bridge", "--role", "gpu", "--pair", "6", "--listen", gpuUDP, "--peer", hostUDP, "--pcie", "memory", "--insecure-no-keys")
	waitfor.Until(t, "the GPU side running", func() bool { return strings.Contains(gpuLog.String(), "bridge running") })
	_, hostLog := daemon(t, "bridge", "--role", "host", "--pair", "6", "--listen", hostUDP, "--peer", gpuUDP,
		"--pcie", "nettlp:127.0.46.5:127.0.46.6", "--insecure-no-keys")
	waitfor.Until(t, "both sides' link-up events", func() bool {
		return strings.Contains(gpuLog.String(), "link-up at") && strings.Contains(hostLog.String(), "link-up at")
	})
	up := regexp.MustCompile(`event="link-up at [0-9.]+(ns|us|ms|s) session 0x[0-9a-f]+"`)
	for side, log := range map[string]string{"gpu": gpuLog.String(), "host": hostLog.String()} {
		if !up.MatchString(log) || strings.Contains(log, "µ") {
			t.Errorf("the %s side's log, want its link-up event as %s and no µs:\n%s", side, up, log)
		}
	}
}
