package vm

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
)

// outage is a Link over loopback UDP whose GPU side falls silent for
// silence once the host side has sent after frames: longer than the host
// bridge's DeadAfter, so the host side declares the link down in the
// middle of the guest's copies.
type outage struct {
	after   int64
	silence time.Duration

	sent  atomic.Int64 // frames the host side sent
	mu    sync.Mutex
	until time.Time // the GPU side's sends are dropped until then
}

func (*outage) Path() string { return "loopback" }

func (o *outage) Open(_ uint32, loss float64) (driver.Transport, driver.Transport, error) {
	h, g, err := loopbackPair(loss, 1)
	if err != nil {
		return nil, nil, err
	}
	return &outageSide{Transport: h, o: o, host: true}, &outageSide{Transport: g, o: o}, nil
}

// outageSide hides the batch interfaces: each frame goes through Send.
type outageSide struct {
	driver.Transport
	o    *outage
	host bool
}

func (s *outageSide) Send(frame []byte) error {
	o := s.o
	now := time.Now()
	if s.host {
		if o.sent.Add(1) == o.after {
			o.mu.Lock()
			o.until = now.Add(o.silence)
			o.mu.Unlock()
		}
		return s.Transport.Send(frame)
	}
	o.mu.Lock()
	silent := now.Before(o.until)
	o.mu.Unlock()
	if silent {
		return nil
	}
	return s.Transport.Send(frame)
}

// TestDemoNamesLinkDown: when the pair's link goes down during the
// guest's copies (the GPU side silent for longer than the host side's
// DeadAfter), the host side surprise-removes the GPU and what was in
// flight is lost. The demo fails, and its error says the link went down,
// not only what the guest's check saw (a session 23 CI run under load
// failed with "the 67108864 bytes read back differ", nothing more).
func TestDemoNamesLinkDown(t *testing.T) {
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	link := &outage{after: 3000, silence: 3 * DefaultBridge(1).DeadAfter / 2}
	res, err := Demo(ctx, DemoOptions{VM: o, Link: link, Bytes: 16 << 20})
	b, _ := json.Marshal(res)
	t.Logf("demo with an outage after %d host frames: %s", link.after, b)
	if link.sent.Load() < link.after {
		t.Fatalf("the host side sent %d frames, fewer than the %d the outage waits for", link.sent.Load(), link.after)
	}
	if res.LinkDowns == 0 {
		t.Fatalf("link_downs 0 after an outage of %v (error %v)", link.silence, err)
	}
	if err == nil {
		t.Fatalf("the demo passed with the link down %d time(s) during the copies", res.LinkDowns)
	}
	if !strings.Contains(err.Error(), "link went down") || res.Error != err.Error() {
		t.Fatalf("error %q (result's %q) does not name the link going down", err, res.Error)
	}
}
