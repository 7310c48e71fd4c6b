package labnet

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

func TestOptionErrors(t *testing.T) {
	t.Parallel()
	if err := RequireRoot(1000); !errors.Is(err, ErrNamespaces) {
		t.Errorf("RequireRoot(1000) = %v, want ErrNamespaces", err)
	}
	if err := RequireRoot(0); err != nil {
		t.Errorf("RequireRoot(0) = %v", err)
	}
	privtest.NetNS(t)
	for name, pairs := range map[string][]Pair{
		"none":          nil,
		"same id":       {{1, 4791}, {1, 4792}},
		"same port":     {{1, 4791}, {2, 4791}},
		"port 0":        {{1, 0}},
		"switch's port": {{1, 8855}},
	} {
		if n, err := Start(context.Background(), Options{Pairs: pairs}); !errors.Is(err, ErrNamespaces) {
			t.Errorf("%s: Start = %v, want ErrNamespaces", name, err)
			if n != nil {
				n.Close()
			}
		}
	}
}

// TestFramesCrossTheSwitch: a dxpu frame of a pair sent from the host
// namespace to its switch port arrives at the GPU end, rewritten to come
// from the GPU's switch port, and the switch counts it; a frame of a pair
// not in the table does not arrive.
func TestFramesCrossTheSwitch(t *testing.T) {
	privtest.NetNS(t)
	privtest.BPF(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n, err := Start(ctx, Options{Pairs: []Pair{{ID: 7, UDPPort: 4791}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var hc, gc *net.UDPConn
	if err := n.Host.Do(func() (err error) {
		hc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(n.HostAddr(4791)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if err := n.GPU.Do(func() (err error) {
		gc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(n.GPUAddr(4791)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	frame := func(pair uint32) []byte {
		h := make(encap.Header, encap.HeaderLen+8)
		h.SetVersionFlags(encap.Version, 0)
		h.SetType(encap.MsgAck)
		h.SetPairID(pair)
		return h
	}
	// Not in the table: dropped (sent first, so that it would be read
	// first if it came through).
	if _, err := hc.WriteToUDPAddrPort(frame(8), n.HostSwitch()); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.WriteToUDPAddrPort(frame(7), n.HostSwitch()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	gc.SetReadDeadline(time.Now().Add(20 * time.Second))
	k, from, err := gc.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("nothing arrived at the GPU end: %v", err)
	}
	if got := encap.Header(buf[:k]).PairID(); got != 7 {
		t.Errorf("GPU end got a frame of pair %d, want 7 (pair 8 is in no table)", got)
	}
	if from != n.GPUSwitch() {
		t.Errorf("frame came from %v, want the GPU's switch port %v", from, n.GPUSwitch())
	}
	c, err := n.PairCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c[7].ToGPU.Frames != 1 || c[7].ToHost.Frames != 0 {
		t.Errorf("switch counted %+v for pair 7, want one frame to the GPU", c[7])
	}
	n.Close()
	n.Close() // twice is safe
	if _, err := n.Metrics(ctx); err == nil {
		t.Error("metrics of a closed fabric answered")
	}
}

func TestParseSamples(t *testing.T) {
	t.Parallel()
	got, err := ParseSamples(strings.NewReader("# HELP x y\nx_total{pair=\"1\"} 42\n\ny 1.5\n"))
	if err != nil || got[`x_total{pair="1"}`] != 42 || got["y"] != 1.5 || len(got) != 2 {
		t.Errorf("ParseSamples = %v, %v", got, err)
	}
	for _, bad := range []string{"novalue\n", "x notanumber\n"} {
		if _, err := ParseSamples(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSamples(%q) took it", bad)
		}
	}
}
