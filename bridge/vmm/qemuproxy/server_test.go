package qemuproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/bridge/vmm"
	"github.com/dxpu/dxpu/tlp"
)

const (
	guestRAM  = 1 << 20
	bar0Guest = 0xfc00_0000
	bar0Dev   = 0x9000_0000
	gpuID     = tlp.ID(3 << 8)
)

// fakeQEMU plays QEMU's side of the socket.
type fakeQEMU struct {
	t    *testing.T
	fd   int
	once sync.Once
}

// close closes QEMU's end, once: QEMU dying or letting go.
func (q *fakeQEMU) close() { q.once.Do(func() { unix.Close(q.fd) }) }

func (q *fakeQEMU) send(m Msg, fds ...int) {
	q.t.Helper()
	b := AppendMsg(nil, m)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(q.fd, b, oob, nil, 0); err != nil {
		q.t.Fatal(err)
	}
}

// call sends a request and returns the RET's value.
func (q *fakeQEMU) call(m Msg) uint64 {
	q.t.Helper()
	q.send(m)
	var b [HeaderLen + retLen]byte
	for got := 0; got < len(b); {
		n, err := unix.Read(q.fd, b[got:])
		if err != nil || n == 0 {
			q.t.Fatalf("reading RET: %v (%d bytes)", err, n)
		}
		got += n
	}
	if c, _, err := ParseHeader(b[:]); err != nil || c != Ret {
		q.t.Fatalf("answer %v %v", c, err)
	}
	return binary.LittleEndian.Uint64(b[HeaderLen:])
}

// gpuStub is the GPU side: a memory-backed BAR0 behind the GPU-side
// runner, and a channel of the completions of its own DMA reads.
type gpuStub struct {
	r    *driver.Runner
	q    *driver.TLPQueue
	cpls chan []byte
	c    *nettlp.Completer
	// unread, once closed, makes the runner drop completions instead of
	// waiting for a reader: it delivers under its lock, so a full cpls
	// nobody reads would hold the lock, and every sender, for ever.
	unread     chan struct{}
	unreadOnce sync.Once
}

// ignoreCompletions: nobody reads cpls from now on.
func (g *gpuStub) ignoreCompletions() { g.unreadOnce.Do(func() { close(g.unread) }) }

func newGPUStub(t *testing.T, r *driver.Runner) *gpuStub {
	mem, err := nettlp.NewSparseMemory(bar0Dev, 16<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &gpuStub{r: r, q: driver.NewTLPQueue(), cpls: make(chan []byte, 64), unread: make(chan struct{})}
	if g.c, err = nettlp.NewCompleter(nettlp.CompleterConfig{CompleterID: gpuID}, mem, 0, nil); err != nil {
		t.Fatal(err)
	}
	r.OnTLP = func(v tlp.View) {
		if k := v.Kind(); k == tlp.CplD || k == tlp.Cpl {
			select {
			case g.cpls <- append([]byte(nil), v...):
			case <-g.unread:
			}
			return
		}
		g.q.Push(v)
	}
	return g
}

func (g *gpuStub) run(ctx context.Context) error {
	return g.q.Serve(ctx, func(b []byte) error {
		_ = g.c.Handle(b, func(c []byte) error { return driver.SendWait(ctx, g.r, c) })
		return nil
	})
}

type rig struct {
	q         *fakeQEMU
	srv       *Server
	port      *vmm.Port
	ram       *vmm.GuestRAM
	gpu       *gpuStub
	mem       []byte // the guest RAM, as the fake QEMU maps it
	stopGPU   context.CancelFunc
	serverErr chan error
}

func newRig(t *testing.T) *rig {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(pair[1]), "proxy")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fq := &fakeQEMU{t: t, fd: pair[0]}
	t.Cleanup(fq.close)

	hc, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), hc.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	hc.SetPeer(gc.LocalAddr())
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		b, err := bridge.New(bridge.Config{Role: role, PairID: 9, Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second,
			CompletionTimeout: 5 * time.Second, MaxRTO: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = driver.New(b, []*udp.Conn{hc, gc}[i])
	}
	ram := &vmm.GuestRAM{}
	t.Cleanup(func() { ram.Close() })
	port, err := vmm.NewPort(vmm.Config{Device: gpuID, BARs: [6]vmm.BAR{0: {Size: 16 << 20, Device: bar0Dev}},
		CompletionTimeout: 300 * time.Millisecond}, ram)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(NewConn(nc.(*net.UnixConn)), port, ram, runners[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	gpu := newGPUStub(t, runners[1])
	ctx, cancel := context.WithCancel(context.Background())
	gctx, stopGPU := context.WithCancel(ctx)
	rg := &rig{q: fq, srv: srv, port: port, ram: ram, gpu: gpu, stopGPU: stopGPU, serverErr: make(chan error, 1)}
	var wg sync.WaitGroup
	for _, fn := range []func(context.Context) error{runners[0].Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(ctx) }()
	}
	for _, fn := range []func(context.Context) error{runners[1].Run, gpu.run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(gctx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Labelled, so that a test can find the server's goroutines.
		pprof.Do(ctx, pprof.Labels(serverLabel, t.Name()), func(ctx context.Context) { rg.serverErr <- srv.Run(ctx) })
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	for runners[0].State() != bridge.StateUp || runners[1].State() != bridge.StateUp {
		select {
		case <-ctx.Done():
			t.Fatal("bridge pair not up")
		case <-time.After(time.Millisecond):
		}
	}

	// QEMU's start: the memory map (a memfd), the INTx eventfds, then the
	// guest's firmware places BAR0.
	memfd, err := unix.MemfdCreate(memfdName(t), unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(memfd)
	if err := unix.Ftruncate(memfd, guestRAM); err != nil {
		t.Fatal(err)
	}
	if rg.mem, err = unix.Mmap(memfd, 0, guestRAM, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(rg.mem) })
	rg.q.send(Msg{Cmd: SyncSysmem, Regions: []Region{{GPA: 0, Size: guestRAM}}}, memfd)
	e1, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	e2, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	rg.q.send(Msg{Cmd: SetIRQFD}, e1, e2)
	unix.Close(e1)
	unix.Close(e2)
	if v := rg.q.call(Msg{Cmd: CfgWrite, Cfg: CfgAccess{Addr: 0x10, Val: bar0Guest, Len: 4}}); v != 0 {
		t.Fatalf("config write answered %#x", v)
	}
	if v := rg.q.call(Msg{Cmd: CfgRead, Cfg: CfgAccess{Addr: 0x10, Len: 4}}); v != bar0Guest {
		t.Fatalf("BAR0 reads %#x", v)
	}
	return rg
}

// TestGuestMMIOAndDMA: a guest's BAR writes and reads reach the remote
// device's BAR through the bridge pair, and the device's DMA reads and
// writes land in the guest RAM QEMU shared.
func TestGuestMMIOAndDMA(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.q.call(Msg{Cmd: BarWrite, Bar: BarAccess{Addr: bar0Guest + 0x100, Val: 0x1122334455667788, Size: 8, Memory: true}})
	if v := rg.q.call(Msg{Cmd: BarRead, Bar: BarAccess{Addr: bar0Guest + 0x100, Size: 8, Memory: true}}); v != 0x1122334455667788 {
		t.Fatalf("BAR read %#x", v)
	}
	if v := rg.q.call(Msg{Cmd: BarRead, Bar: BarAccess{Addr: bar0Guest + 0x104, Size: 2, Memory: true}}); v != 0x3344 {
		t.Fatalf("2-byte BAR read %#x", v)
	}
	// The device writes 64 KiB into guest RAM and reads it back.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	want := make([]byte, 64<<10)
	for i := range want {
		want[i] = byte(i*13 + 1)
	}
	const gpa = 0x4_0000
	for off := 0; off < len(want); off += 256 {
		b, err := (&tlp.Packet{Kind: tlp.MWr, RequesterID: gpuID, Address: gpa + uint64(off), FirstBE: 0xf, LastBE: 0xf, Data: want[off : off+256]}).AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := driver.SendWait(ctx, rg.gpu.r, b); err != nil {
			t.Fatal(err)
		}
	}
	var got []byte
	for off := 0; off < len(want); off += 512 {
		b, _ := (&tlp.Packet{Kind: tlp.MRd, RequesterID: gpuID, Tag: uint16(off/512) & 0xff, Address: gpa + uint64(off), Length: 128, FirstBE: 0xf, LastBE: 0xf}).AppendTo(nil)
		if err := driver.SendWait(ctx, rg.gpu.r, b); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 512; {
			select {
			case c := <-rg.gpu.cpls:
				got = append(got, tlp.View(c).Payload()...)
				n += len(tlp.View(c).Payload())
			case <-ctx.Done():
				t.Fatalf("DMA read at %#x: %d of 512 bytes", gpa+off, n)
			}
		}
	}
	if !bytes.Equal(got, want) || !bytes.Equal(rg.mem[gpa:gpa+len(want)], want) {
		t.Fatal("DMA data differ")
	}
	// A DMA read outside guest RAM gets UR.
	b, _ := (&tlp.Packet{Kind: tlp.MRd, RequesterID: gpuID, Tag: 200, Address: guestRAM + 0x1000, Length: 1, FirstBE: 0xf}).AppendTo(nil)
	if err := driver.SendWait(ctx, rg.gpu.r, b); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rg.gpu.cpls:
		if tlp.View(c).Status() != tlp.StatusUR {
			t.Fatalf("read outside RAM: %v", tlp.View(c).Status())
		}
	case <-ctx.Done():
		t.Fatal("no answer to a read outside guest RAM")
	}
	if s := rg.srv.Stats(); s.MapChanges.Load() != 1 || s.IRQFDs.Load() != 1 {
		t.Errorf("map changes %d, irqfds %d", s.MapChanges.Load(), s.IRQFDs.Load())
	}
}

// TestDeadDeviceReadsAllOnes: with the GPU side gone, the guest's reads
// get all ones within the completion timeout: the vCPU never hangs.
func TestDeadDeviceReadsAllOnes(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.stopGPU()
	for i := range 3 {
		if v := rg.q.call(Msg{Cmd: BarRead, Bar: BarAccess{Addr: bar0Guest, Size: 4, Memory: true}}); v != 0xffff_ffff {
			t.Fatalf("read %d after the device died: %#x", i, v)
		}
	}
	if rg.port.Stats().Timeouts.Load()+rg.port.Stats().ErrorCompletions.Load() == 0 {
		t.Error("no timeout counted")
	}
}

// TestMalformedMessageEndsTheSession: garbage on the socket is an error
// naming the message; the server stops, closing its end.
func TestMalformedMessageEndsTheSession(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	bad := binary.LittleEndian.AppendUint32(nil, 42)
	bad = append(bad, make([]byte, 12)...)
	if _, err := unix.Write(rg.q.fd, bad); err != nil {
		t.Fatal(err)
	}
	// A server that keeps running after it is fed junk hangs here: go
	// test -timeout ends it, naming this test.
	if err := <-rg.serverErr; !errors.Is(err, ErrCommand) {
		t.Fatalf("server ended with %v, want ErrCommand", err)
	}
}
