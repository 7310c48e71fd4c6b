package nettlp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

var (
	clientAddr = netip.MustParseAddr("127.0.0.1")
	targetAddr = netip.MustParseAddr("127.0.0.2")
)

// startTarget serves mem on addr until the test ends.
func startTarget(t *testing.T, addr netip.Addr, mem Memory, cc CompleterConfig) *Target {
	t.Helper()
	privtest.Loopback(t)
	tg, err := NewTarget(TargetConfig{Addr: addr, Completer: cc}, mem)
	if err != nil {
		t.Fatalf("cannot bind the NetTLP ports on %v: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return tg
}

func dialTag(t *testing.T, local, remote netip.Addr, tag uint8) *Client {
	t.Helper()
	privtest.Loopback(t)
	c, err := Dial(local, remote, tag, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	// libtlp waits 500 ms; a loaded test machine may need longer, and the
	// tests assert behaviour, not time.
	c.Timeout = 20 * time.Second
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLoopbackLibtlp drives the target with libtlp's own request shapes on
// all 16 tags at once: unaligned addresses, 1 byte to 16 KiB, pieces that
// cross 4 KiB, below and above 4 GiB.
func TestLoopbackLibtlp(t *testing.T) {
	for _, mps := range []int{256, 4096} {
		t.Run(fmt.Sprintf("MPS%d", mps), func(t *testing.T) {
			mem := newTestMemory(t, 0, 8<<30)
			tg := startTarget(t, targetAddr, mem, CompleterConfig{MPS: mps})
			sizes := []int{1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 255, 256, 257, 1000, 1500, 4095, 4096, 4097, 8192, 16384}
			var wg sync.WaitGroup
			errs := make(chan error, MaxTags)
			for tag := range MaxTags {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dialTag(t, clientAddr, targetAddr, uint8(tag))
					rng := rand.New(rand.NewPCG(uint64(tag), 7))
					for i, size := range sizes {
						for _, base := range []uint64{0x1000_0000, 0x1_2345_0000} { // below and above 4 GiB
							off := uint64(rng.IntN(4))
							if i%2 == 1 {
								off += 0xff0 // start just before a 4 KiB boundary
							}
							addr := base + uint64(tag)<<20 + uint64(i)<<14 + off
							if err := roundTrip(c, mem, rng, addr, size, mps); err != nil {
								errs <- fmt.Errorf("tag %d: %w", tag, err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			s := tg.Stats().Snapshot()
			if s.Malformed != 0 || s.UR != 0 || s.WritesLost != 0 || s.SendErrors != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// roundTrip writes random data libtlp's way (MPS pieces), checks memory,
// and reads it back libtlp's way with an MRRS that libtlp can reassemble.
func roundTrip(c *Client, mem Memory, rng *rand.Rand, addr uint64, size, mps int) error {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if _, err := c.WriteAligned(addr, data, 256); err != nil {
		return err
	}
	// A read on the same port is a barrier: it is served after the writes.
	mrrs := 512
	if addr&3 != 0 {
		mrrs = 128 // an unaligned piece must fit one CplD for libtlp
		if mps >= 4096 {
			mrrs = 2048
		}
	}
	got := make([]byte, size)
	n, err := c.ReadAligned(addr, got, mrrs)
	if err != nil || n != size {
		return fmt.Errorf("read %d at %#x (mrrs %d): %d bytes, %v", size, addr, mrrs, n, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read %d at %#x: data differs from what was written", size, addr)
	}
	inMem := make([]byte, size)
	if err := mem.ReadAt(inMem, addr); err != nil || !bytes.Equal(inMem, data) {
		return fmt.Errorf("memory at %#x (%d bytes) differs from what was written (%v)", addr, size, err)
	}
	// One dma_read of the whole thing where libtlp allows it (one request,
	// Length up to 1024 DW: 4 KiB aligned or the span fits one CplD).
	if _, _, l := LibtlpByteEnables(addr, size); l <= 1024 && (addr&3 == 0 || 4*l <= mps && l < 1024) {
		clear(got)
		if n, err := c.Read(addr, got); err != nil || n != size || !bytes.Equal(got, data) {
			return fmt.Errorf("single dma_read %d at %#x: %d bytes, %v", size, addr, n, err)
		}
	}
	return nil
}

// TestLoopbackPostedBursts sends bursts of posted writes on every tag,
// each burst no larger than the socket buffer the kernel granted, each
// closed by a read on the same port (served only after the writes), and
// checks that every write landed.
func TestLoopbackPostedBursts(t *testing.T) {
	mem := newTestMemory(t, 0, 1<<30)
	tg := startTarget(t, targetAddr, mem, CompleterConfig{})
	// A 256-byte write costs well under 2 KiB of receive buffer (skb
	// truesize); the kernel reports twice what it counts.
	perBurst := min(2000, tg.Transport().RecvBuffer(0)/2/2048)
	if perBurst < 16 {
		t.Fatalf("receive buffer of %d bytes", tg.Transport().RecvBuffer(0))
	}
	const bursts = 5
	var wg sync.WaitGroup
	errs := make(chan error, MaxTags)
	for tag := range MaxTags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialTag(t, clientAddr, targetAddr, uint8(tag))
			base := uint64(tag) << 24
			piece := make([]byte, 256)
			for b := range bursts {
				for i := range perBurst {
					addr := base + uint64(b*perBurst+i)*256
					fillPiece(piece, addr)
					if _, err := c.Write(addr, piece); err != nil {
						errs <- err
						return
					}
				}
				var dw [4]byte
				if _, err := c.Read(base, dw[:]); err != nil {
					errs <- fmt.Errorf("tag %d barrier read: %w", tag, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v (stats %+v)", err, tg.Stats().Snapshot())
	}
	want := uint64(MaxTags * bursts * perBurst)
	if got := tg.Stats().Writes.Load(); got != want {
		t.Fatalf("%d writes applied, %d sent", got, want)
	}
	got, exp := make([]byte, 256), make([]byte, 256)
	for tag := range MaxTags {
		for i := range bursts * perBurst {
			addr := uint64(tag)<<24 + uint64(i)*256
			mem.ReadAt(got, addr)
			fillPiece(exp, addr)
			if !bytes.Equal(got, exp) {
				t.Fatalf("write at %#x lost", addr)
			}
		}
	}
	t.Logf("%d tags x %d bursts x %d posted writes, receive buffer %d bytes", MaxTags, bursts, perBurst, tg.Transport().RecvBuffer(0))
}

func fillPiece(p []byte, addr uint64) {
	for i := range p {
		p[i] = byte(addr>>8) ^ byte(addr>>16) ^ byte(i)
	}
}

// TestTargetRepliesFromRequestPort checks the reply path with a plain
// socket on another port: the CplD comes from the port the MRd went to,
// back to the sender's port, with a running sequence number.
func TestTargetRepliesFromRequestPort(t *testing.T) {
	privtest.Loopback(t)
	mem := newTestMemory(t, 0, 1<<20)
	tg := startTarget(t, targetAddr, mem, CompleterConfig{})
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(clientAddr, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(targetAddr, Port(5)))
	// Junk first: a datagram shorter than the header, a reserved Fmt. The
	// port goes on serving (in order, so they are counted before the reads
	// below are answered).
	conn.WriteToUDP([]byte{1, 2, 3}, dst)
	conn.WriteToUDP(append(make([]byte, HeaderLen), 0xa0, 0, 0x7b, 0, 0, 0, 0, 0, 0, 0, 0, 0), dst)
	var seqs []uint16
	for i := range 3 {
		req := append(make([]byte, HeaderLen), libtlpMRd(0x1000+uint64(i)*4, 4, 0x45)...)
		if _, err := conn.WriteToUDP(req, dst); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		conn.SetReadDeadline(time.Now().Add(waitfor.Stall)) // one datagram: its own bound
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from != netip.AddrPortFrom(targetAddr, Port(5)) {
			t.Fatalf("reply from %v", from)
		}
		h, b, err := SplitDatagram(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		v, err := tlp.Parse(b)
		if err != nil || v.Kind() != tlp.CplD || v.Tag() != 0x45 {
			t.Fatalf("reply % x: %v", b, err)
		}
		want := make([]byte, 4)
		mem.ReadAt(want, 0x1000+uint64(i)*4)
		if !bytes.Equal(v.Payload(), want) {
			t.Fatalf("payload % x, want % x", v.Payload(), want)
		}
		seqs = append(seqs, h.Seq())
	}
	if seqs[1] != seqs[0]+1 || seqs[2] != seqs[1]+1 {
		t.Fatalf("sequence numbers %v", seqs)
	}
	if s := tg.Stats().Snapshot(); s.Malformed != 2 || s.Datagrams != 5 || s.Reads != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTransportRefusesWildcard(t *testing.T) {
	privtest.Loopback(t)
	for _, a := range []netip.Addr{{}, netip.IPv4Unspecified(), netip.MustParseAddr("::1")} {
		if _, err := Listen(TransportConfig{Local: a}); !errors.Is(err, ErrConfig) {
			t.Errorf("%v: %v", a, err)
		}
	}
	if _, err := Listen(TransportConfig{Local: targetAddr, Tags: 17}); !errors.Is(err, ErrConfig) {
		t.Errorf("17 tags: %v", err)
	}
}
