package realtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
)

// TestBridgedGPUConfigErrors: bad configurations are refused with ErrConfig
// naming the field, before anything runs; the zero config gets the
// defaults enumeration would program.
func TestBridgedGPUConfigErrors(t *testing.T) {
	t.Parallel()
	b, err := bridge.New(bridge.Config{Role: bridge.RoleGPU, PairID: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := driver.New(b, nil)
	for _, tc := range []struct {
		cfg  BridgedGPUConfig
		name string
	}{
		{BridgedGPUConfig{BAR0: 0x9000_1000}, "BAR0"},
		{BridgedGPUConfig{BAR0: 0x1_0000_0000}, "BAR0"},
		{BridgedGPUConfig{BAR1: 0x21_0000_0000}, "BAR1"},
		{BridgedGPUConfig{BAR3: 0x20_0200_0000}, "overlap"},
		{BridgedGPUConfig{MPS: 100}, "MPS"},
		{BridgedGPUConfig{MRRS: 8192}, "MRRS"},
	} {
		if _, err := NewBridgedGPU(r, tc.cfg); !errors.Is(err, nettlp.ErrConfig) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%+v: %v, want ErrConfig naming %s", tc.cfg, err, tc.name)
		}
	}
	if _, err := NewBridgedGPU(nil, BridgedGPUConfig{}); !errors.Is(err, nettlp.ErrConfig) {
		t.Errorf("nil runner: %v", err)
	}
	g, err := NewBridgedGPU(r, BridgedGPUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Config(); c.BAR0 != 0x9000_0000 || c.MPS != 256 || c.MRRS != 512 || c.ID.String() != "03:00.0" {
		t.Errorf("defaults %+v", c)
	}
}
