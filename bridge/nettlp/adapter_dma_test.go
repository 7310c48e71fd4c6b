package nettlp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestAdapterDMARemote: with DMARemote set, requests sent down go to it
// and completions to Remote, and datagrams from both are delivered up.
func TestAdapterDMARemote(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	local, host, dma := netip.MustParseAddr("127.0.2.21"), netip.MustParseAddr("127.0.2.22"), netip.MustParseAddr("127.0.2.23")
	if _, err := NewAdapter(AdapterConfig{Local: local, Remote: host, DMARemote: netip.MustParseAddr("::1")}); !errors.Is(err, ErrConfig) {
		t.Fatalf("IPv6 DMA remote: %v", err)
	}
	a, err := NewAdapter(AdapterConfig{Local: local, Remote: host, DMARemote: dma})
	if err != nil {
		t.Fatalf("cannot bind %v: %v", local, err)
	}
	up := make(chan []byte, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, ReceiverFunc(func(b []byte) error { up <- bytes.Clone(b); return nil })) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	listen := func(addr netip.Addr) *net.UDPConn {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, Port(5))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	hostConn, dmaConn := listen(host), listen(dma)
	recv := func(c *net.UDPConn) []byte {
		buf := make([]byte, 2048)
		c.SetReadDeadline(time.Now().Add(waitfor.Stall))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		_, b, _ := SplitDatagram(buf[:n])
		return b
	}
	mrd := libtlpMRd(0x1000, 64, 0x25)
	cpld := []byte{0x4a, 0, 0, 1, 0x01, 0x00, 0, 4, 0, 0, 0x05, 0x10, 1, 2, 3, 4}
	if err := a.SendTLP(mrd); err != nil {
		t.Fatal(err)
	}
	if got := recv(dmaConn); !bytes.Equal(got, mrd) {
		t.Fatalf("DMA address got % x", got)
	}
	if err := a.SendTLP(cpld); err != nil {
		t.Fatal(err)
	}
	if got := recv(hostConn); !bytes.Equal(got, cpld) {
		t.Fatalf("host got % x", got)
	}
	for _, c := range []*net.UDPConn{dmaConn, hostConn} {
		if _, err := c.WriteToUDPAddrPort(append(make([]byte, HeaderLen), cpld...), netip.AddrPortFrom(local, Port(5))); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-up:
			if !bytes.Equal(b, cpld) {
				t.Fatalf("delivered % x", b)
			}
		case <-time.After(waitfor.Stall):
			t.Fatalf("datagram from %v not delivered", c.LocalAddr())
		}
	}
	if n := a.Stats().Ignored.Load(); n != 0 {
		t.Fatalf("%d datagrams ignored", n)
	}
}
