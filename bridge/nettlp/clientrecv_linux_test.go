package nettlp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
)

// A read's completions, queued in a burst, are taken up to clientBatch per
// system call, and what a call took past the read's last completion is the
// next read's: two 2.5 KiB reads' 20 CplDs, all queued before the first
// read, come back as two whole reads in 3 calls, the second call taking
// the first read's last 2 and the second read's first 6. One datagram per
// call took 20; dropping a call's leftovers left the second read short.
func TestClientTakesCompletionsInBatches(t *testing.T) {
	local, remote := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	const tag = 5
	c, err := Dial(local, remote, tag, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Skipf("no 127.0.0.2 to dial from 127.0.0.1: %v", err)
	}
	defer c.Close()
	port := Port(tag)
	target, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, port)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, port)))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	const size, mps = 2560, 256
	pattern := func(read, i int) byte { return byte(read*131 + i*7) }
	for read := range 2 {
		for off := 0; off < size; off += mps {
			data := make([]byte, mps)
			for i := range data {
				data[i] = pattern(read, off+i)
			}
			p := tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(3, 0, 0), Tag: tag,
				ByteCount: uint16(size - off), LowerAddress: uint8(off & 0x7f), Data: data}
			d, err := p.AppendTo(make([]byte, HeaderLen))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := target.Write(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.Timeout = 5 * time.Second
	for read := range 2 {
		got := make([]byte, size)
		n, err := c.Read(0x1000_0000, got)
		if err != nil || n != size {
			t.Fatalf("read %d: %d bytes, %v", read, n, err)
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = pattern(read, i)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d brought other bytes than its completions carried", read)
		}
	}
	if c.rx.calls != 3 {
		t.Errorf("20 queued completions took %d recvmmsg calls, want 3 (%d each)", c.rx.calls, clientBatch)
	}
}

// A receive error other than a timeout reads as net's own would, naming
// the socket's two ends ("read udp A->B: ... connection refused"), and
// still matches the errno: a read from an address nothing listens on gets
// the kernel's port-unreachable back as ECONNREFUSED. The batched receive
// once returned the bare errno ("connection refused").
func TestClientReceiveErrorNamesTheSocket(t *testing.T) {
	// Addresses of its own: a tag port on 127.0.0.1 may be held by a test
	// of another package running beside it.
	local, remote := netip.MustParseAddr("127.0.3.99"), netip.MustParseAddr("127.0.3.98")
	c, err := Dial(local, remote, 9, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Skipf("no tag port 9 on 127.0.3.99: %v", err)
	}
	defer c.Close()
	c.Timeout = 5 * time.Second
	_, err = c.Read(0x1000, make([]byte, 4))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("read from a closed port: %v, want ECONNREFUSED", err)
	}
	want := "read udp 127.0.3.99:" // then the port, "->127.0.3.98:" and the port
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "->127.0.3.98:") {
		t.Fatalf("error %q does not name the socket (want %q...->127.0.3.98:...)", err, want)
	}
}
