package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/scalebench"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestBenchScaleProcess runs `dxpu bench scale` as a process, small: two
// pairs (four `dxpu bridge` processes, given --spin) on loopback, with jumbo frames and
// 2 KiB completions (a host side left at --max-payload 512 would refuse
// the GPU side's completions and no read would finish). Every pair must move
// data, the aggregate must be their sum, and the baselines must be there;
// a bad flag ends it in one line, exit 2, no result.
func TestBenchScaleProcess(t *testing.T) {
	privtest.Loopback(t)
	dir, err := dxpuBin()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dxpu")
	var stdout, stderr strings.Builder
	c := exec.Command(bin, "bench", "scale", "--loopback", "--pairs", "2", "--duration", "300ms", "--idle-samples", "20",
		"--readers", "2", "--mtu", "8972", "--mps", "2048", "--spin", "20us", "--json")
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := waitfor.Command(c, waitfor.CommandStall); err != nil {
		t.Fatalf("dxpu bench scale: %v\nstderr:\n%s", err, stderr.String())
	}
	var res scalebench.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	t.Logf("%s", stdout.String())
	if res.Mode != "loopback" || !res.Sealed || !res.Pinned || res.UDPGoodputGbps <= 0 || res.UDPDatagramBytes != 8972 || len(res.Scenarios) != 1 ||
		res.MTUBytes != 8972 || res.MPSBytes != 2048 || res.SpinUs != 20 {
		t.Fatalf("result %+v: want one sealed loopback scenario, its pairs pinned by default, with --mtu 8972 --mps 2048 --spin 20us and a raw UDP baseline of 8972-byte datagrams", res)
	}
	if !strings.Contains(stdout.String(), `"duration_per_scenario_s": 0.3,`) {
		t.Errorf("JSON lacks duration_per_scenario_s 0.3 (--duration 300ms)")
	}
	// One result object, indented as every command's (it was one line).
	if !strings.HasPrefix(stdout.String(), "{\n  \"mode\": \"loopback\",\n") {
		t.Errorf("want one object indented by two spaces")
	}
	s := res.Scenarios[0]
	if s.Name != "pairs-2" || s.Pairs != 2 || len(s.PairGbps) != 2 || len(s.HostGbps) != 2 || len(s.BoxGbps) != 2 {
		t.Fatalf("scenario %+v: want pairs-2 over 2 hosts and 2 boxes", s)
	}
	sum := 0.0
	for i, g := range s.PairGbps {
		if g <= 0 {
			t.Errorf("pair %d moved nothing", i+1)
		}
		sum += g
	}
	if d := sum - s.AggregateGbps; d > 1e-9 || d < -1e-9 || s.JainFairness != scalebench.Jain(s.PairGbps) || s.JainFairness <= 0.5 {
		t.Errorf("aggregate %v, Jain %v for pairs %v", s.AggregateGbps, s.JainFairness, s.PairGbps)
	}
	if s.MMIOSamples == 0 || s.MMIOReadP50Us <= 0 || s.EchoP50Us <= 0 || s.MMIOIdleP50Us <= 0 || s.Reads == 0 || s.CPUSecondsPerGB <= 0 {
		t.Errorf("latency or CPU figures missing: %+v", s)
	}
	if s.FramesSent == 0 || s.SRTTMeanUs <= 0 {
		t.Errorf("bridge metrics missing: frames sent %d, SRTT %v us", s.FramesSent, s.SRTTMeanUs)
	}
	if s.SwitchDrops != nil {
		t.Errorf("switch drops %d on loopback, where there is no switch", *s.SwitchDrops)
	}

	stdout.Reset()
	stderr.Reset()
	c = exec.Command(bin, "bench", "scale", "--loopback", "--pairs", "2", "--readers", "16")
	c.Stdout, c.Stderr = &stdout, &stderr
	err = waitfor.Command(c, waitfor.CommandStall)
	var ee *exec.ExitError
	msg := strings.TrimSuffix(stderr.String(), "\n")
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || stdout.Len() != 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, "--readers 16: want 1..15") {
		t.Errorf("--readers 16: %v, stdout %q, stderr %q: want exit 2 and one line naming the flag", err, stdout.String(), msg)
	}
}
