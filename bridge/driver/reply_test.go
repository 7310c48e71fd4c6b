package driver_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// A GPU side that answers reads from OnDelivered with Reply (no goroutine
// of its own, no SendMany) gets every completion to the requester; Reply
// outside the runner's callbacks is refused.
func TestRunnerReply(t *testing.T) {
	rs := pollRunners(t, testConfig)
	if _, err := rs[1].Reply([][]byte{{0}}); !errors.Is(err, driver.ErrNotDelivering) {
		t.Fatalf("Reply outside a callback: %v, want ErrNotDelivering", err)
	}
	var reqs []tlp.View // GPU side, under its runner's lock
	var replyErr error
	rs[1].OnTLP = func(v tlp.View) { reqs = append(reqs, append(tlp.View(nil), v...)) }
	rs[1].OnDelivered = func() {
		var cpls [][]byte
		for _, r := range reqs {
			p := tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(1, 0, 0), RequesterID: r.RequesterID(), Tag: r.Tag(),
				ByteCount: 4, LowerAddress: uint8(r.Address() & 0x7f), Data: []byte{1, 2, 3, 4}}
			b, err := p.AppendTo(nil)
			if err != nil {
				replyErr = err
				return
			}
			cpls = append(cpls, b)
		}
		reqs = reqs[:0]
		if n, err := rs[1].Reply(cpls); err != nil || n != len(cpls) {
			replyErr = errors.Join(replyErr, err)
		}
	}
	var mu sync.Mutex
	answered := map[uint16]bool{}
	rs[0].OnTLP = func(v tlp.View) {
		mu.Lock()
		answered[v.Tag()] = true
		mu.Unlock()
	}
	ctx, stop := runUp(t, rs)
	const n = 40
	for i := range n {
		p := tlp.Packet{Kind: tlp.MRd, Addr64: true, Tag: uint16(i), FirstBE: 0xf, Length: 1, Address: base + uint64(i)*64}
		raw, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := driver.SendWait(ctx, rs[0], raw); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Until(t, "every read answered through Reply", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) == n
	})
	stop()
	if replyErr != nil {
		t.Fatalf("Reply in OnDelivered: %v", replyErr)
	}
	if c := rs[0].Counters(); c.CompletionTimeouts != 0 || c.SynthesizedCA != 0 {
		t.Fatalf("reads timed out: %+v", c)
	}
}
