package capture

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestLiveCaptureOnLoopback: with the default filter, datagrams to and
// from the dxpu port are captured once each (loopback shows every frame
// twice), in order and whole, while datagrams between other ports are
// not; the frames queued when the capture is told to stop are written
// too, and the summary names the kernel's drops.
func TestLiveCaptureOnLoopback(t *testing.T) {
	privtest.Root(t)
	const port = 7201
	a := netip.MustParseAddrPort("127.0.44.1:7201")
	b := netip.MustParseAddrPort("127.0.44.2:40123")
	ca, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(b))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	out := filepath.Join(t.TempDir(), "live.pcap")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	var summary bytes.Buffer
	go func() {
		done <- Live(ctx, LiveOptions{Interface: "lo", Out: out, UDPPort: port, Ready: func() { close(ready) }}, &summary)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("capture did not start: %v", err)
	}
	var want [][]byte
	for i := range 20 {
		p := bytes.Repeat([]byte{byte(i)}, 40+i)
		if i%2 == 0 {
			_, err = cb.WriteToUDPAddrPort(p, a) // to the port
		} else {
			_, err = ca.WriteToUDPAddrPort(p, b) // from the port
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
		// Between two other ports: filtered out.
		if _, err := cb.WriteToUDPAddrPort([]byte("not dxpu"), netip.MustParseAddrPort("127.0.44.1:9")); err != nil {
			t.Fatal(err)
		}
	}
	cancel() // every datagram is queued by now: AF_PACKET sees it as it is sent
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary.String(), "20 frames captured on lo (0 dropped by the kernel)") {
		t.Errorf("summary: %s", summary.Bytes())
	}
	r, err := pcapio.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got [][]byte
	for {
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.CaptureLength != ci.Length {
			t.Errorf("frame %d cut: %d of %d bytes", len(got)+1, ci.CaptureLength, ci.Length)
		}
		lay, err := encap.Walk(data, &encap.Config{UDPPort: port})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, append([]byte(nil), data[lay.IPv4+28:]...))
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames captured, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("frame %d carries %x, want %x", i+1, got[i], want[i])
		}
	}
}

// TestParseBPF reads tcpdump -ddd's format and names what is wrong.
func TestParseBPF(t *testing.T) {
	f, err := ParseBPF("4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n")
	if err != nil || len(f) != 4 || f[1].Code != 21 || f[1].Jf != 1 || f[1].K != 2048 || f[2].K != 262144 {
		t.Fatalf("%+v, %v", f, err)
	}
	for _, bad := range []struct{ in, want string }{
		{"", "empty"},
		{"3\n6 0 0 0\n", "instruction count"},
		{"1\n6 0 0\n", "want \"code jt jf k\""},
		{"1\n6 0 300 0\n", "instruction 1"},
	} {
		if _, err := ParseBPF(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error naming %q", bad.in, err, bad.want)
		}
	}
}
