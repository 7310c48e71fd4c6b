package conform

import (
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/dxpu/dxpu/bridge/afpacket"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// vethConns makes a fresh network namespace holding a veth pair and opens
// an AF_PACKET transport on each end, towards the other.
func vethConns(t *testing.T) (driver.Transport, driver.Transport) {
	privtest.NetNS(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatal(err)
		}
		ns.Close() // the sockets keep the namespace alive until closed
	}()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "kit0"}, PeerName: "iut0"}); err != nil {
		t.Fatalf("veth: %v", err)
	}
	var links [2]netlink.Link
	for i, name := range []string{"kit0", "iut0"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		links[i] = l
	}
	kc, err := afpacket.ListenTagging("kit0", links[1].Attrs().HardwareAddr)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := afpacket.Listen("iut0", links[0].Attrs().HardwareAddr)
	if err != nil {
		kc.Close()
		t.Fatal(err)
	}
	return kc, ic
}

// Over raw Ethernet (AF_PACKET on a veth pair, frames padded to the
// Ethernet minimum) the bridge conforms too. Not parallel: see
// TestBridgeConforms.
func TestBridgeConformsOverEthernet(t *testing.T) {
	rep := runConforming(t, setup{controlled: true, conns: vethConns, padded: true})
	for _, f := range rep.Failed() {
		t.Errorf("%s fails: %s", f.Rule, f.Reason)
	}
	if r, _ := rep.Result("FRM-2"); r.Verdict != NA {
		t.Errorf("FRM-2 judged on padded Ethernet frames: %s %s", r.Verdict, r.Reason)
	}
	if r, _ := rep.Result("FRM-1"); r.Verdict != Pass || !strings.Contains(r.Reason, "802.1Q") {
		t.Errorf("FRM-1 over raw Ethernet: %s %s, want pass with a padded and a tagged frame", r.Verdict, r.Reason)
	}
}

// A bridge that takes the frame length, not the body length, as the end of
// a frame (it drops padded frames) fails FRM-1.
func TestPaddingRefusedFailsFRM1(t *testing.T) {
	rep := runAgainst(t, setup{controlled: true, conns: vethConns, padded: true, wrap: func(tr driver.Transport) driver.Transport {
		return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
			h, _, err := encap.ParseHeader(b)
			return err != nil || len(b) == encap.HeaderLen+h.BodyLen()
		}}
	}}, "handshake", "credit-frames")
	expectFail(t, rep, "FRM-1")
}
