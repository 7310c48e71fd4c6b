package switching

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func listenUDP(t *testing.T, network, addr string) *net.UDPConn {
	t.Helper()
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP(network, ua)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The batched receive names an IPv6 source with a scope as
// ReadFromUDPAddrPort does, the zone of each datagram its own: the name
// of the interface, or the index where none has it.
func TestUDPBatcherSourceZone(t *testing.T) {
	b, err := newUDPBatcher(listenUDP(t, "udp", "[::1]:0"))
	if err != nil {
		t.Fatal(err)
	}
	lo, err := net.InterfaceByIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	ll := netip.MustParseAddr("fe80::1")
	for i, c := range []struct {
		scope uint32
		want  string
	}{
		{1, "[fe80::1%" + lo.Name + "]:4791"},
		{0x7fffffff, "[fe80::1%2147483647]:4791"}, // no such interface
		{1, "[fe80::1%" + lo.Name + "]:4791"},
		{0, "[fe80::1]:4791"},
	} {
		b.rxName[i] = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ll.As16(), Scope_id: c.scope}
		setSockaddrPort(&b.rxName[i].Port, 4791)
		if got := b.from(i).String(); got != c.want {
			t.Errorf("datagram %d from fe80::1 scope %d: %s, want %s", i, c.scope, got, c.want)
		}
	}
}

// queue addresses each destination in the socket's family: an IPv4 one,
// mapped or not, as sockaddr_in on an IPv4 socket and as ::ffff:a.b.c.d on
// an IPv6 one; an IPv6 one on an IPv4 socket is refused (errNoFamily).
func TestUDPBatcherQueueFamilies(t *testing.T) {
	b4, err := newUDPBatcher(listenUDP(t, "udp4", "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	b6, err := newUDPBatcher(listenUDP(t, "udp", "[::]:0"))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("payload")
	for _, to := range []string{"127.0.0.2:4791", "[::ffff:127.0.0.2]:4791"} {
		ap := netip.MustParseAddrPort(to)
		if !b4.queue(0, payload, ap) {
			t.Fatalf("IPv4 socket refused %s", to)
		}
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b4.txName[0]))
		if sa.Family != unix.AF_INET || sa.Addr != [4]byte{127, 0, 0, 2} || sockaddrPort(&sa.Port) != 4791 || b4.tx[0].Hdr.Namelen != unix.SizeofSockaddrInet4 {
			t.Errorf("IPv4 socket, to %s: family %d addr %v port %d namelen %d", to, sa.Family, sa.Addr, sockaddrPort(&sa.Port), b4.tx[0].Hdr.Namelen)
		}
		if !b6.queue(0, payload, ap) {
			t.Fatalf("IPv6 socket refused %s", to)
		}
		sa6 := &b6.txName[0]
		if sa6.Family != unix.AF_INET6 || netip.AddrFrom16(sa6.Addr) != netip.MustParseAddr("::ffff:127.0.0.2") || sockaddrPort(&sa6.Port) != 4791 {
			t.Errorf("IPv6 socket, to %s: family %d addr %v port %d", to, sa6.Family, netip.AddrFrom16(sa6.Addr), sockaddrPort(&sa6.Port))
		}
	}
	if b4.queue(0, payload, netip.MustParseAddrPort("[2001:db8::1]:4791")) {
		t.Error("IPv4 socket queued an IPv6 destination")
	}
}

// A failing recvmmsg is an error of receive, not an empty batch: Run ends
// with it instead of spinning. Here the kernel cannot copy a datagram into
// the first buffer (EFAULT).
func TestUDPBatcherReceiveError(t *testing.T) {
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	b, err := newUDPBatcher(c)
	if err != nil {
		t.Fatal(err)
	}
	b.rxIov[0].Base = nil // length stays udpBufLen
	s := listenUDP(t, "udp4", "127.0.0.1:0")
	if _, err := s.WriteToUDPAddrPort([]byte("x"), c.LocalAddr().(*net.UDPAddr).AddrPort()); err != nil {
		t.Fatal(err)
	}
	n, err := b.receive()
	if !errors.Is(err, unix.EFAULT) {
		t.Fatalf("receive into an unmapped buffer: %d, %v; want EFAULT", n, err)
	}
}
