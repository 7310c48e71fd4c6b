package afxdp

import (
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{FrameSize: 1000}, "frame size"},
		{Config{RingSize: 1000}, "power of two"},
		{Config{NumFrames: 1024, RingSize: 1024}, "half"},
	} {
		if err := tc.cfg.defaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.cfg, err, tc.want)
		}
	}
	c := Config{}
	if err := c.defaults(); err != nil || c.NumFrames != 4096 || c.FrameSize != 2048 || c.RingSize != 1024 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

// Binding to an interface that does not exist fails with an error naming
// it, and releases what it set up.
func TestOpenNoSuchInterface(t *testing.T) {
	privtest.Root(t)
	_, err := Open(1<<30, 0, Config{})
	if err == nil || !strings.Contains(err.Error(), "ifindex 1073741824") {
		t.Fatalf("err %v", err)
	}
}
