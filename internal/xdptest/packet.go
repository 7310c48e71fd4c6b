package xdptest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Conn is a raw AF_PACKET socket on one interface of a test namespace. It
// returns frames with their VLAN tag even where veth strips it.
type Conn struct {
	sock  *switching.PacketSocket
	Iface Iface
}

// OpenPacket opens a raw socket on iface inside ns; it does not see its own
// transmissions. Closed when the test ends.
func OpenPacket(tb testing.TB, ns NS, iface Iface) *Conn {
	tb.Helper()
	var s *switching.PacketSocket
	err := ns.Do(func() error {
		var err error
		s, err = switching.OpenPacketSocket(iface.Index)
		return err
	})
	if err != nil {
		tb.Fatalf("xdptest: AF_PACKET on %s: %v", iface.Name, err)
	}
	tb.Cleanup(func() { s.Close() })
	return &Conn{sock: s, Iface: iface}
}

// Send transmits a whole Ethernet frame.
func (c *Conn) Send(frame []byte) error { return c.sock.WriteFrame(frame) }

// RecvMatching returns the next frame for which keep is true, or an error
// after timeout (a liveness bound, not a timing assertion).
func (c *Conn) RecvMatching(timeout time.Duration, keep func([]byte) bool) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 16+65536)
	for time.Now().Before(deadline) {
		off, end, err := c.sock.ReadFrame(buf, 16)
		if errors.Is(err, switching.ErrTimeout) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("xdptest: receiving on %s: %w", c.Iface.Name, err)
		}
		if keep(buf[off:end]) {
			return append([]byte(nil), buf[off:end]...), nil
		}
	}
	return nil, fmt.Errorf("xdptest: nothing received on %s within %v", c.Iface.Name, timeout)
}

// IsDXPU reports whether a frame is dxpu on raw Ethernet or over UDP to
// port 8855 (tagged or not, as encap.Walk reads it): it skips the IPv6 and
// ARP chatter of freshly created interfaces.
func IsDXPU(b []byte) bool {
	l, err := encap.Walk(b, &encap.Config{NoNetTLP: true})
	return err == nil && (l.Encap == encap.EncapDxpuEth || l.Encap == encap.EncapDxpuUDP)
}
