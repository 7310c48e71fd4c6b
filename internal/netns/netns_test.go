package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/privtest"
)

func newNS(t *testing.T, name string) *NS {
	t.Helper()
	ns, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// nsInode is the inode of the calling thread's network namespace.
func nsInode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// TestDoRunsInside: fn sees a namespace other than the test's, with lo up
// and nothing else, and the calling goroutine is not moved.
func TestDoRunsInside(t *testing.T) {
	privtest.NetNS(t)
	t.Parallel()
	ns := newNS(t, "inside")
	before, err := nsInode()
	if err != nil {
		t.Fatal(err)
	}
	var inside uint64
	var ifaces []net.Interface
	err = ns.Do(func() error {
		var err error
		if inside, err = nsInode(); err != nil {
			return err
		}
		ifaces, err = net.Interfaces()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside == before {
		t.Fatalf("Do ran in the caller's namespace (inode %d)", inside)
	}
	if len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagUp == 0 {
		t.Fatalf("interfaces inside: %+v, want lo alone, up", ifaces)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Handle), &st); err != nil || st.Ino != inside {
		t.Fatalf("Handle is inode %d (%v), Do ran in %d", st.Ino, err, inside)
	}
	if after, _ := nsInode(); after != before {
		t.Fatalf("the caller's thread moved from namespace %d to %d", before, after)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}

// TestVethCarriesUDP: a veth between two namespaces, addressed, carries a
// datagram from a socket opened in one to a socket opened in the other,
// used from ordinary goroutines; Close of the owner deletes both ends.
func TestVethCarriesUDP(t *testing.T) {
	privtest.NetNS(t)
	t.Parallel()
	a, b := newNS(t, "a"), newNS(t, "b")
	macA, macB := net.HardwareAddr{2, 0x11, 0, 0, 0, 1}, net.HardwareAddr{2, 0x11, 0, 0, 0, 2}
	ia, ib, err := a.AddVeth(VethEnd{Name: "va", MAC: macA, Addr: netip.MustParsePrefix("10.9.0.1/24")},
		b, VethEnd{Name: "vb", MAC: macB, Addr: netip.MustParsePrefix("10.9.0.2/24")}, 1400)
	if err != nil {
		t.Fatal(err)
	}
	if ia.Name != "va" || ib.Name != "vb" || ia.MAC.String() != macA.String() || ib.MAC.String() != macB.String() {
		t.Fatalf("ends %+v %+v", ia, ib)
	}
	for _, end := range []struct {
		ns   *NS
		name string
	}{{a, "va"}, {b, "vb"}} {
		l, err := end.ns.Netlink().LinkByName(end.name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MTU != 1400 || l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("%s: MTU %d, flags %v: want 1400, up", end.name, l.Attrs().MTU, l.Attrs().Flags)
		}
	}
	var ca, cb *net.UDPConn
	if err := a.Do(func() (err error) {
		ca, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 9, 0, 1)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	if err := b.Do(func() (err error) {
		cb, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 9, 0, 2), Port: 7000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	// The first datagram waits for ARP; resend until one arrives (each
	// read waits a second, a liveness bound).
	buf := make([]byte, 64)
	for try := 0; ; try++ {
		if _, err := ca.WriteToUDP([]byte("hello"), &net.UDPAddr{IP: net.IPv4(10, 9, 0, 2), Port: 7000}); err != nil {
			t.Fatal(err)
		}
		cb.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := cb.ReadFromUDP(buf)
		if err == nil {
			if string(buf[:n]) != "hello" || !from.IP.Equal(net.IPv4(10, 9, 0, 1)) {
				t.Fatalf("got %q from %v", buf[:n], from)
			}
			break
		}
		if try == 10 {
			t.Fatalf("no datagram across the veth: %v", err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Netlink().LinkByName("vb"); !errors.As(err, new(netlink.LinkNotFoundError)) {
		t.Fatalf("vb after its owner closed: %v, want gone", err)
	}
}

// TestAddVethFailureLeavesNothing: when configuring the second end fails
// (an IPv6 address where IPv6 is disabled), the first end, already made
// and addressed, does not survive either; bad input is refused before
// anything is made.
func TestAddVethFailureLeavesNothing(t *testing.T) {
	privtest.NetNS(t)
	t.Parallel()
	ns := newNS(t, "fail")
	if err := ns.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err := ns.AddVeth(VethEnd{Name: "x0", Addr: netip.MustParsePrefix("10.9.1.1/24")}, nil,
		VethEnd{Name: "x1", Addr: netip.MustParsePrefix("fd00::1/64")}, 0)
	if err == nil || !strings.Contains(err.Error(), "fd00::1/64 on x1") {
		t.Fatalf("IPv6 address on an end without IPv6: %v, want an error naming it", err)
	}
	for _, n := range []string{"x0", "x1"} {
		if _, err := ns.Netlink().LinkByName(n); !errors.As(err, new(netlink.LinkNotFoundError)) {
			t.Errorf("%s after a failed AddVeth: %v, want gone", n, err)
		}
	}
	for _, c := range []struct{ a, b VethEnd }{
		{VethEnd{Name: "0123456789abcdef"}, VethEnd{Name: "y"}},
		{VethEnd{Name: ""}, VethEnd{Name: "y"}},
		{VethEnd{Name: "x", MAC: net.HardwareAddr{1, 2}}, VethEnd{Name: "y"}},
	} {
		if _, _, err := ns.AddVeth(c.a, nil, c.b, 0); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, _, err := ns.AddVeth(VethEnd{Name: "x"}, nil, VethEnd{Name: "y"}, -1); err == nil {
		t.Error("MTU -1: no error")
	}
}

// TestNamed: a named namespace is mounted where `ip netns` looks, refuses
// a second of the same name, and is unmounted by Close.
func TestNamed(t *testing.T) {
	privtest.NetNS(t)
	t.Parallel()
	name := fmt.Sprintf("dxpu-nstest-%d", os.Getpid())
	ns, err := NewNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var mounted, held unix.Stat_t
	if err := unix.Stat(filepath.Join(MountDir, name), &mounted); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(ns.Handle), &held); err != nil || mounted.Ino != held.Ino {
		t.Fatalf("%s is inode %d, the handle %d (%v)", name, mounted.Ino, held.Ino, err)
	}
	if dup, err := NewNamed(name); err == nil {
		dup.Close()
		t.Fatal("a second namespace of the same name: no error")
	}
	if err := unix.Stat(filepath.Join(MountDir, name), &mounted); err != nil || mounted.Ino != held.Ino {
		t.Fatalf("the failed duplicate disturbed the first: %v", err)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(MountDir, name)); !os.IsNotExist(err) {
		t.Fatalf("%s after Close: %v, want gone", name, err)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if ns, err := NewNamed(bad); err == nil {
			ns.Close()
			t.Errorf("name %q: no error", bad)
		}
	}
}

// TestTXChecksum: offload starts on for a veth; SetTXChecksum turns it off
// and on again, as TXChecksum reads back; an unknown interface is an
// error naming it.
func TestTXChecksum(t *testing.T) {
	privtest.NetNS(t)
	t.Parallel()
	ns := newNS(t, "csum")
	if _, _, err := ns.AddVeth(VethEnd{Name: "c0"}, nil, VethEnd{Name: "c1"}, 0); err != nil {
		t.Fatal(err)
	}
	if on, err := ns.TXChecksum("c0"); err != nil || !on {
		t.Fatalf("a new veth's TX checksum offload: %v (%v), want on", on, err)
	}
	for _, want := range []bool{false, true} {
		if err := ns.SetTXChecksum("c0", want); err != nil {
			t.Fatal(err)
		}
		got, err := ns.TXChecksum("c0")
		if err != nil || got != want {
			t.Fatalf("TX checksum %v (%v), want %v", got, err, want)
		}
	}
	if err := ns.SetTXChecksum("nosuch0", false); err == nil || !errors.Is(err, unix.ENODEV) {
		t.Fatalf("unknown interface: %v, want ENODEV", err)
	}
}
