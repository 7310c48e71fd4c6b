package nettlp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// A Batch sends its datagrams in order, numbered per socket, one system
// call per run on one socket, and allocates nothing once made.
func TestBatchOrderCallsAllocs(t *testing.T) {
	privtest.Loopback(t)
	local, remote := netip.MustParseAddr("127.0.87.1"), netip.MustParseAddr("127.0.87.2")
	var sinks [2]*net.UDPConn
	for i := range sinks {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, Port(uint16(i)))))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sinks[i] = c
	}
	a, err := NewAdapter(AdapterConfig{Local: local, Remote: remote, Tags: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := a.NewBatch()
	// CplDs: tags 0,0,0,1,1,0 (tag in byte 10 of a completion).
	tags := []byte{0, 0, 0, 1, 1, 0}
	tlps := make([][]byte, len(tags))
	for i, tag := range tags {
		tlps[i] = []byte{0x4a, 0, 0, 1, 0, 0, 0, 4, 0, 0, tag, 0, byte(i), 1, 2, 3}
	}
	calls := a.Transport().SendCalls()
	for _, p := range tlps {
		if _, err := b.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if lost, err := b.Flush(); lost != 0 || err != nil {
		t.Fatalf("Flush: lost %d: %v", lost, err)
	}
	if got := a.Transport().SendCalls() - calls; got != 3 {
		t.Errorf("%d send calls for runs on ports 0,1,0, want 3", got)
	}
	seq := [2]uint16{}
	buf := make([]byte, MaxDatagram)
	for i, tag := range tags {
		_ = sinks[tag].SetReadDeadline(time.Now().Add(waitfor.Stall))
		n, src, err := sinks[tag].ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if src != netip.AddrPortFrom(local, Port(uint16(tag))) || Header(buf).Seq() != seq[tag] || string(buf[HeaderLen:n]) != string(tlps[i]) {
			t.Fatalf("datagram %d from %v seq %d % x, want from port %#x seq %d % x", i, src, Header(buf).Seq(), buf[HeaderLen:n], Port(uint16(tag)), seq[tag], tlps[i])
		}
		seq[tag]++
	}
	allocs := testing.AllocsPerRun(50, func() {
		for _, p := range tlps {
			_, _ = b.Add(p)
		}
		_, _ = b.Flush()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch, want 0", allocs)
	}
}
