package nettlpside

import (
	"errors"
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

// TestConfigErrors: bad configurations are refused with ErrConfig, before
// anything runs.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	r := idleRunner(t, bridge.RoleGPU)
	if _, err := NewHost(nil, nil, nil); !errors.Is(err, nettlp.ErrConfig) {
		t.Errorf("NewHost(nil, nil): %v", err)
	}
	if _, err := NewMemoryDevice(r, nil, nettlp.CompleterConfig{}); !errors.Is(err, nettlp.ErrConfig) {
		t.Errorf("nil memory: %v", err)
	}
}
