package xdp_test

import (
	"time"

	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/xdp"
)

// TestBenchProgramRuns checks that the benchmark measures the forwarding
// path (both programs redirect); it asserts no timing.
func TestBenchProgramRuns(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	for _, udp := range []bool{false, true} {
		f, err := xdp.BenchProgram(udp, 1000, 3)
		if err != nil {
			t.Fatal(err)
		}
		if f.XDPNsPerFrame <= 0 || f.BaselineNsPerFrame <= 0 {
			t.Fatalf("no figures: %+v", f)
		}
		t.Logf("%+v", f)
	}
}

func TestBenchUserspacePacket(t *testing.T) {
	privtest.NetNS(t)
	f, err := xdp.BenchUserspace("packet", xdp.PacketDriver, 200*time.Millisecond, 128)
	if err != nil {
		t.Fatal(err)
	}
	if f.Forwarded == 0 || f.Forwarded > f.Sent {
		t.Fatalf("forwarded %d of %d", f.Forwarded, f.Sent)
	}
	t.Logf("%+v", f)
}

func TestBenchUserspaceAFXDP(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	f, err := xdp.BenchUserspace("afxdp", xdp.AFXDPDriver, 200*time.Millisecond, 128)
	if err != nil {
		t.Fatal(err)
	}
	if f.Forwarded == 0 || f.Forwarded > f.Sent {
		t.Fatalf("forwarded %d of %d", f.Forwarded, f.Sent)
	}
	t.Logf("%+v", f)
}
