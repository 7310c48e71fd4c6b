package nettlpside

import (
	"errors"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
)

func idleRunner(t *testing.T, role bridge.Role) *driver.Runner {
	b, err := bridge.New(bridge.Config{Role: role, PairID: 1})
	if err != nil {
		t.Fatal(err)
	}
	return driver.New(b, nil)
}

// TestConfigErrors: bad configurations are refused with ErrConfig naming
// the field, before anything runs.
func TestConfigErrors(t *testing.T) {
	r := idleRunner(t, bridge.RoleGPU)
	for _, tc := range []struct {
		cfg  GPUConfig
		name string
	}{
		{GPUConfig{BAR0: 0x9000_1000}, "BAR0"},
		{GPUConfig{BAR0: 0x1_0000_0000}, "BAR0"},
		{GPUConfig{BAR1: 0x21_0000_0000}, "BAR1"},
		{GPUConfig{BAR3: 0x20_0200_0000}, "overlap"},
		{GPUConfig{MPS: 100}, "MPS"},
		{GPUConfig{MRRS: 8192}, "MRRS"},
	} {
		if _, err := NewGPU(r, tc.cfg); !errors.Is(err, nettlp.ErrConfig) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%+v: %v, want ErrConfig naming %s", tc.cfg, err, tc.name)
		}
	}
	if _, err := NewGPU(nil, GPUConfig{}); !errors.Is(err, nettlp.ErrConfig) {
		t.Errorf("nil runner: %v", err)
	}
	if _, err := NewHost(nil, nil, nil); !errors.Is(err, nettlp.ErrConfig) {
		t.Errorf("NewHost(nil, nil): %v", err)
	}
	if _, err := NewMemoryDevice(r, nil, nettlp.CompleterConfig{}); !errors.Is(err, nettlp.ErrConfig) {
		t.Errorf("nil memory: %v", err)
	}
	g, err := NewGPU(r, GPUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Config(); c.BAR0 != 0x9000_0000 || c.MPS != 256 || c.MRRS != 512 || c.ID.String() != "03:00.0" {
		t.Errorf("defaults %+v", c)
	}
}
