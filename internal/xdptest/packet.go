package xdptest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
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

// IsDXPU reports whether a frame is dxpu on raw Ethernet (optionally
// tagged) or UDP to port 8855: it skips the IPv6 and ARP chatter of
// freshly created interfaces.
func IsDXPU(b []byte) bool {
	if len(b) < 14 {
		return false
	}
	et, l3 := binary.BigEndian.Uint16(b[12:]), 14
	if et == 0x8100 && len(b) >= 18 {
		et, l3 = binary.BigEndian.Uint16(b[16:]), 18
	}
	switch et {
	case 0x88B5:
		return true
	case 0x0800:
		return len(b) >= l3+24 && b[l3+9] == 17 && binary.BigEndian.Uint16(b[l3+22:]) == 8855
	}
	return false
}
