package bridgeagent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestBuffersEveryPair: --window and --credits (Options.Window and
// Credits) size every pair's bridge as the agent programs it: the window
// rounded up to a power of two, each class's header credits and data
// credits of credits*max-payload/16 (what a HELLO then announces:
// bridged.TestBuffersReachTheWire); 0 keeps the bridge's defaults. Values
// the bridge refuses are usage errors naming the flag, before the agent
// serves.
func TestBuffersEveryPair(t *testing.T) {
	t.Parallel()
	listen := netip.MustParseAddrPort("127.0.0.1:4791")
	for _, c := range []struct {
		window, credits, maxPayload int
		wantWindow, wantH, wantData int
	}{
		{0, 0, 0, bridge.DefaultWindow, bridge.DefaultHeaderCredits, bridge.DefaultHeaderCredits * 512 / 16},
		{2048, 512, 0, 2048, 512, 512 * 512 / 16},
		{3000, 100, 256, 4096, 100, 100 * 256 / 16},
	} {
		o := Options{Role: bridge.RoleGPU, Listen: listen, Window: c.window, Credits: c.credits, MaxPayload: c.maxPayload}
		if err := o.fill(); err != nil {
			t.Fatalf("--window %d --credits %d: %v", c.window, c.credits, err)
		}
		b, err := bridge.New(o.bridgeConfig(3, make([]byte, seal.KeyLen), 1))
		if err != nil {
			t.Fatal(err)
		}
		cfg := b.Config()
		if cfg.Window != c.wantWindow {
			t.Errorf("--window %d: a pair's bridge has window %d, want %d", c.window, cfg.Window, c.wantWindow)
		}
		for i, cc := range cfg.Credits {
			if cc != (bridge.ClassCredits{Headers: c.wantH, Data: c.wantData}) {
				t.Errorf("--credits %d --max-payload %d: class %d %+v, want %d headers, %d data units", c.credits, c.maxPayload, i, cc, c.wantH, c.wantData)
			}
		}
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Window: -1}, "--window -1: bridge: bad config: Window"},
		{Options{Window: 40000}, "--window 40000: bridge: bad config: Window"},
		{Options{Credits: -1}, "--credits -1: bridge: bad config: Credits"},
		{Options{Credits: 40000}, "--credits 40000: bridge: bad config: Credits"},
	} {
		o := c.o
		o.Role, o.Listen = bridge.RoleHost, listen
		if err := o.fill(); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Window %d Credits %d: %v, want a usage error with %q", c.o.Window, c.o.Credits, err, c.want)
		}
	}
}
