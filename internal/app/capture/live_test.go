package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/fabric/switching"
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
	stop := startLive(t, out, port)
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
	summary := stop() // every datagram is queued by now: AF_PACKET sees it as it is sent
	if !strings.Contains(summary, "20 frames captured on lo (0 dropped by the kernel)") {
		t.Errorf("summary: %s", summary)
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
		// As on the wire: the checksum the sender left to the NIC is there.
		checkDatagram(t, len(got)+1, data)
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

// TestLiveCaptureCutsGSOSends: a UDP segmentation-offload send leaves as
// several datagrams, and the capture holds those datagrams, each with its
// own lengths and valid checksums, not the one super-frame the packet
// socket sees.
func TestLiveCaptureCutsGSOSends(t *testing.T) {
	privtest.Root(t)
	const port = 7202
	dst := netip.MustParseAddrPort("127.0.44.3:7202")
	rx, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(dst))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.44.4:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	out := filepath.Join(t.TempDir(), "gso.pcap")
	stop := startLive(t, out, port)
	// 250 bytes in segments of 100: datagrams of 100, 100 and 50 bytes.
	payload := make([]byte, 250)
	for i := range payload {
		payload[i] = byte(i)
	}
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], 100)
	if _, _, err := tx.WriteMsgUDPAddrPort(payload, oob, dst); err != nil {
		t.Skipf("this kernel has no UDP GSO: %v", err)
	}
	for _, want := range []int{100, 100, 50} {
		b := make([]byte, 300)
		n, err := rx.Read(b)
		if err != nil || n != want {
			t.Fatalf("the receiver got %d bytes (%v), want %d: the send was not cut", n, err, want)
		}
	}
	summary := stop()
	if !strings.Contains(summary, "3 frames captured on lo") {
		t.Errorf("summary: %s", summary)
	}
	r, err := pcapio.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []byte
	for i := 0; ; i++ {
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			if i != 3 {
				t.Fatalf("%d frames captured, want the 3 datagrams", i)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.CaptureLength != ci.Length || len(data) != 14+20+8+[]int{100, 100, 50}[i] {
			t.Fatalf("frame %d: %d of %d bytes captured, %d held", i+1, ci.CaptureLength, ci.Length, len(data))
		}
		checkDatagram(t, i+1, data)
		got = append(got, data[42:]...)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("the datagrams carry %x, want %x", got, payload)
	}
}

// checkDatagram checks an untagged IPv4/UDP frame's lengths and
// checksums.
func checkDatagram(t *testing.T, i int, f []byte) {
	t.Helper()
	ip := encap.IPv4(f[14:])
	u := encap.UDP(f[14+ip.HeaderLen():])
	if ip.TotalLen() != len(f)-14 || u.Length() != len(f)-14-ip.HeaderLen() {
		t.Errorf("frame %d: IP length %d, UDP length %d, frame %d bytes", i, ip.TotalLen(), u.Length(), len(f))
	}
	if !ip.ChecksumValid() {
		t.Errorf("frame %d: bad IP header checksum % x", i, f[14:34])
	}
	pseudo := sumWords(ip.Src()) + sumWords(ip.Dst()) + 17 + uint32(u.Length())
	if c := switching.Checksum(u[:u.Length()], pseudo); u.Checksum() == 0 || c != 0 {
		t.Errorf("frame %d: UDP checksum %#04x does not verify (%#04x)", i, u.Checksum(), c)
	}
}

// startLive captures on lo into out with the default filter for port;
// stop ends the capture and returns its summary line.
func startLive(t *testing.T, out string, port uint16) (stop func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
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
	return func() string {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return summary.String()
	}
}
