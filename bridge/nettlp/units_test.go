package nettlp

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
)

// TestClientTimeoutWritesUs: a read nobody answers fails naming the
// client's timeout as `dxpu help units` spells durations (500us, never
// Go's 500µs).
func TestClientTimeoutWritesUs(t *testing.T) {
	t.Parallel()
	local, remote := netip.MustParseAddr("127.0.47.1"), netip.MustParseAddr("127.0.47.2")
	// A peer that takes the request and never answers (with none, the
	// kernel's port unreachable would end the read first).
	silent, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, Port(5))))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c, err := Dial(local, remote, 5, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 500 * time.Microsecond
	_, err = c.Read(0x1000, make([]byte, 4))
	if !errors.Is(err, ErrTimeout) || !strings.HasSuffix(err.Error(), "0 of 4 bytes after 500us") {
		t.Errorf("an unanswered read: %v, want ErrTimeout after 500us", err)
	}
}
