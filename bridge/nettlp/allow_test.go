package nettlp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// TestTargetAnswersOnlyAllowedSources: a read from a source outside Allow
// is dropped unanswered and counted, so the target reflects nothing to a
// forged source; an allowed source is served.
func TestTargetAnswersOnlyAllowedSources(t *testing.T) {
	privtest.Loopback(t)
	addr := netip.MustParseAddr("127.0.0.42")
	mem := newTestMemory(t, 0, 1<<20)
	tg, err := NewTarget(TargetConfig{Addr: addr, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, mem)
	if err != nil {
		t.Fatalf("cannot bind the NetTLP ports on %v: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	stranger, err := Dial(netip.MustParseAddr("127.0.0.43"), addr, 3, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.Timeout = 300 * time.Millisecond
	if _, err := stranger.Read(0x1000, make([]byte, 64)); err == nil {
		t.Fatal("a source outside Allow got an answer")
	}
	waitfor.Until(t, "the refused datagram counted", func() bool { return tg.Stats().Refused.Load() >= 1 })
	if s := tg.Stats(); s.Reads.Load() != 0 || s.Completions.Load() != 0 {
		t.Fatalf("refused read served: %+v", s.Snapshot())
	}
	friend := dialTag(t, clientAddr, addr, 3)
	if _, err := friend.Read(0x1000, make([]byte, 64)); err != nil {
		t.Fatalf("allowed source: %v", err)
	}
}

func TestAllowDefaultsToLoopback(t *testing.T) {
	t.Parallel()
	var c TargetConfig
	for a, want := range map[string]bool{"127.0.0.9": true, "::1": true, "192.168.10.1": false, "::ffff:127.0.0.1": true} {
		if got := c.allowed(netip.MustParseAddr(a)); got != want {
			t.Errorf("default allows %s: %v, want %v", a, got, want)
		}
	}
	c.Allow = []netip.Prefix{netip.MustParsePrefix("192.168.10.0/24")}
	if !c.allowed(netip.MustParseAddr("192.168.10.1")) || c.allowed(netip.MustParseAddr("127.0.0.1")) {
		t.Error("an explicit Allow replaces the loopback default")
	}
}
