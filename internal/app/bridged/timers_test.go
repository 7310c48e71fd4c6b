package bridged

import (
	"bytes"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestRunRefusesBadOptions: a negative --keepalive reached the bridge and
// made it send without pause; --dead-after 0 said "DeadAfter: 10ms must
// exceed Keepalive 50ms", Go's field names and a value the user never
// gave; --pair 0 ran; --mtu 10 named the field MTU. Each is a usage error
// naming the flag and the value given, before anything is bound or
// logged (the unkeyed warning made a usage error two lines).
func TestRunRefusesBadOptions(t *testing.T) {
	t.Parallel()
	addr := netip.MustParseAddrPort("127.0.0.1:1")
	for _, c := range []struct {
		o    Options
		pair uint32
		want string
	}{
		{Options{Keepalive: -5 * time.Millisecond}, 1, "--keepalive -5ms: must not be negative"},
		{Options{DeadAfter: -time.Second}, 1, "--dead-after -1s: must not be negative"},
		{Options{CompletionTimeout: -time.Second}, 1, "--completion-timeout -1s: must not be negative"},
		{Options{Keepalive: 50 * time.Millisecond}, 1, "--dead-after 10ms (the default, for 0) must exceed --keepalive 50ms"},
		{Options{Keepalive: time.Second, DeadAfter: 500 * time.Millisecond}, 1, "--dead-after 500ms must exceed --keepalive 1s"},
		{Options{}, 0, "--pair 0: want 1..16777215"},
		{Options{}, 1 << 24, "--pair 16777216: want 1..16777215"},
		{Options{MTU: 10}, 1, "--mtu 10: bridge: bad config: MTU: 10 cannot carry one"},
	} {
		o := c.o
		o.Pair = c.pair
		var log bytes.Buffer
		o.Role, o.Listen, o.Peer, o.PCIe, o.Insecure = bridge.RoleGPU, addr, addr, PCIe{Kind: KindMemory}, true
		o.Log = slog.New(slog.NewTextHandler(&log, nil))
		err := Run(t.Context(), o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a usage error with it", c.want, err)
		}
		if log.Len() > 0 {
			t.Errorf("%s: logged before the usage error:\n%s", c.want, log.String())
		}
	}
	if err := (Timers{Keepalive: -time.Millisecond}).Check(); !errors.Is(err, ErrNegative) {
		t.Errorf("Timers.Check: %v, want ErrNegative", err)
	}
}
