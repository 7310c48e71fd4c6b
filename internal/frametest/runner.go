package frametest

import (
	"context"
	"encoding/binary"
	"net"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// HostRunner runs a host-side bridge of pair over conn until the test
// ends; then it stops the runner, closes conn and waits for Run to return.
func HostRunner(tb testing.TB, pair uint32, conn driver.Transport) *driver.Runner {
	tb.Helper()
	b, err := bridge.New(bridge.Config{Role: bridge.RoleHost, PairID: pair})
	if err != nil {
		tb.Fatal(err)
	}
	r := driver.New(b, conn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	tb.Cleanup(func() { cancel(); conn.Close(); <-done })
	return r
}

// Ethernet returns frame behind an Ethernet header from src to dst,
// EtherType 0x88B5.
func Ethernet(dst, src net.HardwareAddr, frame []byte) []byte {
	b := binary.BigEndian.AppendUint16(append(append([]byte(nil), dst...), src...), encap.EtherType)
	return append(b, frame...)
}

// Stranger returns the MAC address of stranger i: locally administered,
// never a test pair's own.
func Stranger(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x5e, 0, 0, 0x99, byte(i)}
}

// SendStrangers has n strangers (Stranger(i)) send each frames through
// send: by turns a HELLO of pair and junk, a HELLO first. It returns
// hello, for the peer's own frames.
func SendStrangers(tb testing.TB, pair uint32, n, each int, send func(src net.HardwareAddr, frame []byte) error) (hello []byte) {
	tb.Helper()
	hello = Hello(pair)
	for i := range n {
		for j := range each {
			f := []byte("not a dxpu frame, not from the peer")
			if j%2 == 0 {
				f = hello
			}
			if err := send(Stranger(i), f); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return hello
}

// AwaitForeignCounted waits until r has counted foreign frames dropped by
// its transport and one malformed frame of the peer's, then checks that
// this was all: one frame dropped, none received (no stranger's HELLO
// taken), and r's foreign count the socket's own (socket).
func AwaitForeignCounted(tb testing.TB, r *driver.Runner, foreign uint64, socket func() uint64) {
	tb.Helper()
	waitfor.Until(tb, "the frames dropped", func() bool {
		c := r.Counters()
		return c.DroppedForeignSource == foreign && c.DroppedMalformed == 1
	})
	if c, s := r.Counters(), socket(); c.FramesDropped != 1 || c.FramesReceived != 0 || c.DroppedForeignSource != s {
		tb.Errorf("counters %+v: want 1 frame dropped (malformed), none received, %d foreign (the socket's count: %d)",
			c, foreign, s)
	}
}
