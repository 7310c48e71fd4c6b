package seal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestConfigErrorWritesUs: a refused grace time is named as `dxpu help
// units` spells durations (-5us, never Go's -5µs).
func TestConfigErrorWritesUs(t *testing.T) {
	t.Parallel()
	_, err := seal.New(seal.Config{PairID: 1, Role: encap.RoleHost, Mode: seal.ModeGCM, PreviousGraceTime: -5 * time.Microsecond}, 1, testKey(0))
	if !errors.Is(err, seal.ErrConfig) || !strings.HasSuffix(err.Error(), "PreviousGraceTime -5us is negative") {
		t.Errorf("a negative grace time: %v, want it refused as -5us", err)
	}
}
