package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/app/labnet"
	"github.com/dxpu/dxpu/internal/netns"
)

// ErrNamespaces is returned when the namespace mode cannot run: not root,
// or the namespaces could not be made.
var ErrNamespaces = errors.New("chaos: namespace mode")

// The namespace mode's layout: every daemon in a network namespace of its
// own, and the campaign's clients, observer and cables in one more
// ("campaign"), each joined by a veth (eth0 at the node, c-NODE at the
// other end) to a Linux bridge br0 in a "wire" namespace. Each node's
// eth0 holds the addresses loopback mode gives it on 127.N.0.x, as
// 10.N.0.x/24. Every frame and API call between two of them crosses two
// veths and the bridge. The namespaces are anonymous: nothing shows in
// `ip netns list`, nothing touches the root namespace, and the kernel
// frees each once its last process and socket are gone, so a campaign
// killed mid-way leaves none behind once its daemons are.
var nsNodes = []struct {
	name  string
	hosts []int // the last octets of its addresses
}{
	{"manager", []int{1}},
	{"switch", []int{2}},
	{"host1", []int{11}},
	{"host2", []int{12}},
	{"box1", []int{21}},
	{"box2", []int{22}},
	{"campaign", []int{254, 41, 42}}, // the cables' ends: 41, 42
}

// nsFabric is the namespace mode's network.
type nsFabric struct {
	wire  *netns.NS
	nodes map[string]*netns.NS
	all   []*netns.NS // wire first: closing it deletes the veths
}

// nsCreated, when set (by a test), gets the inode numbers of the
// namespaces a campaign made, to check afterwards that none is held.
var nsCreated func(inodes []uint64)

// RequireRoot is the namespace mode's error for a process of effective
// user euid: nil for root.
func RequireRoot(euid int) error {
	if euid != 0 {
		return fmt.Errorf("%w: --netns needs root to make network namespaces (euid %d): run without --netns for the loopback mode", ErrNamespaces, euid)
	}
	return nil
}

// newNSFabric makes the namespaces, the bridge and the veths, addressed
// in 10.octet.0.0/24; on error nothing of it is left.
func newNSFabric(octet int) (f *nsFabric, err error) {
	if err := RequireRoot(os.Geteuid()); err != nil {
		return nil, err
	}
	f = &nsFabric{nodes: map[string]*netns.NS{}}
	defer func() {
		if err != nil {
			f.close()
			err = fmt.Errorf("%w: %w", ErrNamespaces, err)
		}
	}()
	if f.wire, err = netns.New("wire"); err != nil {
		return f, err
	}
	f.all = append(f.all, f.wire)
	nl := f.wire.Netlink()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0", MTU: labnet.VethMTU}}
	if err := nl.LinkAdd(br); err != nil {
		return f, fmt.Errorf("bridge br0 in wire: %w", err)
	}
	if err := nl.LinkSetUp(br); err != nil {
		return f, fmt.Errorf("bridge br0 up: %w", err)
	}
	for _, n := range nsNodes {
		ns, err := netns.New(n.name)
		if err != nil {
			return f, err
		}
		f.all = append(f.all, ns)
		f.nodes[n.name] = ns
		addr := func(h int) netip.Prefix {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(octet), 0, byte(h)}), 24)
		}
		port := "c-" + n.name
		if _, _, err := f.wire.AddVeth(netns.VethEnd{Name: port}, ns, netns.VethEnd{Name: "eth0", Addr: addr(n.hosts[0])}, labnet.VethMTU); err != nil {
			return f, err
		}
		l, err := nl.LinkByName(port)
		if err == nil {
			err = nl.LinkSetMaster(l, br)
		}
		if err != nil {
			return f, fmt.Errorf("%s on br0: %w", port, err)
		}
		eth, err := ns.Netlink().LinkByName("eth0")
		if err != nil {
			return f, fmt.Errorf("eth0 in %s: %w", n.name, err)
		}
		for _, h := range n.hosts[1:] {
			a := addr(h)
			ipn := &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(24, 32)}
			if err := ns.Netlink().AddrAdd(eth, &netlink.Addr{IPNet: ipn}); err != nil {
				return f, fmt.Errorf("address %v in %s: %w", a, n.name, err)
			}
		}
	}
	if nsCreated != nil {
		var inodes []uint64
		for _, ns := range f.all {
			var st unix.Stat_t
			if unix.Fstat(int(ns.Handle), &st) == nil {
				inodes = append(inodes, st.Ino)
			}
		}
		nsCreated(inodes)
	}
	return f, nil
}

// close deletes the veths (and with them the bridge's ports) and lets go
// of every namespace; the daemons must be gone first.
func (f *nsFabric) close() error {
	var errs []error
	for _, ns := range f.all {
		errs = append(errs, ns.Close())
	}
	return errors.Join(errs...)
}

// do runs fn in the campaign's namespace: the sockets it opens live
// there.
func (f *nsFabric) do(fn func() error) error { return f.nodes["campaign"].Do(fn) }

// transport dials from the campaign's namespace.
func (f *nsFabric) transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		err = f.do(func() (err error) {
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	return t
}
