package bridged

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/encap"
)

// helloOf builds the daemon's bridge from o as Run does and returns the
// HELLO it sends first: what the peer is told of its window and credits.
func helloOf(t *testing.T, o Options) encap.Control {
	t.Helper()
	b, err := bridge.New(o.bridgeConfig())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	n := b.NextFrame(0, buf)
	h, _, err := encap.ParseHeader(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	c, err := encap.ParseControl(h.Body())
	if err != nil || c.Type != encap.CtlHello {
		t.Fatalf("first frame: %v %v, want a HELLO", c.Type, err)
	}
	return c
}

// TestBuffersReachTheWire: --window and --credits (Options.Window and
// Credits) are what the daemon's HELLO announces: the window rounded up
// to a power of two, each class's header credits, and data credits of
// credits*max-payload/16; 0 keeps the bridge's defaults. dxpu bridge had
// no flag for them: a fabric whose bandwidth-delay product exceeded the
// defaults could not be served.
func TestBuffersReachTheWire(t *testing.T) {
	t.Parallel()
	base := Options{Role: bridge.RoleGPU, Pair: 7, Insecure: true}
	for _, c := range []struct {
		window, credits, maxPayload int
		wantWindow, wantH, wantData int
	}{
		{0, 0, 0, bridge.DefaultWindow, bridge.DefaultHeaderCredits, bridge.DefaultHeaderCredits * 512 / 16},
		{2048, 512, 0, 2048, 512, 512 * 512 / 16},
		{3000, 100, 2048, 4096, 100, 100 * 2048 / 16},
		{bridge.MaxWindow, bridge.MaxHeaderCredits, 4096, bridge.MaxWindow, bridge.MaxHeaderCredits, bridge.MaxHeaderCredits * 4096 / 16},
		{1, 1, 0, 1, 1, 512 / 16},
	} {
		o := base
		o.Window, o.Credits, o.MaxPayload = c.window, c.credits, c.maxPayload
		if o.MaxPayload > 1024 {
			o.MTU = 8972
		}
		h := helloOf(t, o)
		if int(h.Window) != c.wantWindow {
			t.Errorf("--window %d: HELLO window %d, want %d", c.window, h.Window, c.wantWindow)
		}
		for _, ty := range []encap.CreditType{encap.CreditPH, encap.CreditNPH, encap.CreditCplH} {
			if int(h.Credits[ty]) != c.wantH {
				t.Errorf("--window %d --credits %d: HELLO credit type %d: %d headers, want %d", c.window, c.credits, ty, h.Credits[ty], c.wantH)
			}
		}
		for _, ty := range []encap.CreditType{encap.CreditPD, encap.CreditNPD, encap.CreditCplD} {
			if int(h.Credits[ty]) != c.wantData {
				t.Errorf("--credits %d --max-payload %d: HELLO credit type %d: %d data units, want %d", c.credits, c.maxPayload, ty, h.Credits[ty], c.wantData)
			}
		}
		if h.Infinite != 0 {
			t.Errorf("--credits %d: infinite classes %#x, want none", c.credits, h.Infinite)
		}
	}
}

// TestBuffersRefusedNamingFlag: a window or credits the bridge refuses is
// a usage error naming the flag and the value given, not the Config field.
func TestBuffersRefusedNamingFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		window, credits int
		want            string
	}{
		{-1, 0, "--window -1: bridge: bad config: Window"},
		{40000, 0, "--window 40000: bridge: bad config: Window"},
		{0, -1, "--credits -1: bridge: bad config: Credits"},
		{0, 40000, "--credits 40000: bridge: bad config: Credits"},
	} {
		// Loopback addresses: were the values taken, Run would go on to
		// bind its socket.
		o := Options{Role: bridge.RoleGPU, Pair: 7, Insecure: true, PCIe: PCIe{Kind: KindMemory}, Window: c.window, Credits: c.credits,
			Listen: netip.MustParseAddrPort("127.0.0.1:0"), Peer: netip.MustParseAddrPort("127.0.0.1:9")}
		err := Run(t.Context(), o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--window %d --credits %d: %v, want a usage error with %q", c.window, c.credits, err, c.want)
		}
	}
}
