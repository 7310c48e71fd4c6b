package qemuproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/vmm"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// serverLabel is the pprof label the rig runs a Server under; its value is
// the test's name.
const serverLabel = "qemuproxy-server"

// memfdName names the rig's guest RAM after the test, so that the test
// can find its mappings in /proc/self/maps.
func memfdName(t *testing.T) string {
	return "dxpu-guest-ram-" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
}

// The storm's target: the device writes and reads [dmaBase, dmaBase+dmaLen)
// of guest RAM; every other byte must keep the fill pattern.
const (
	dmaBase = 0x2_0000
	dmaLen  = 64 << 10
)

func fillByte(i int) byte { return byte(i*7 + 3) }
func dmaByte(i int) byte  { return byte(i*13+1) | 0x80 } // != fillByte(i) for some i in each write

// storm is the GPU side DMAing into and out of guest RAM without pause:
// 256-byte writes over the target range, 512-byte reads of it, and writes
// beyond the end of guest RAM (refused).
type storm struct {
	gpu    *gpuStub
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func startStorm(t *testing.T, rg *rig) *storm {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := &storm{gpu: rg.gpu, cancel: cancel}
	st.wg.Add(2)
	go func() { // the GPU's completions: drained, so that its runner never blocks
		defer st.wg.Done()
		for {
			select {
			case <-rg.gpu.cpls:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer st.wg.Done()
		data := make([]byte, dmaLen)
		for i := range data {
			data[i] = dmaByte(dmaBase + i)
		}
		outside := []tlp.Packet{
			{Kind: tlp.MWr, Address: guestRAM, Data: data[:256]}, // just past the end
			{Kind: tlp.MWr, Address: 1 << 40, Data: data[:64]},
		}
		var b []byte
		send := func(p tlp.Packet) bool {
			p.RequesterID, p.FirstBE, p.LastBE = gpuID, 0xf, 0xf
			var err error
			if b, err = p.AppendTo(b[:0]); err != nil {
				st.fail(fmt.Errorf("building %v at %#x: %w", p.Kind, p.Address, err))
				return false
			}
			if err := driver.SendWait(ctx, rg.gpu.r, b); err != nil {
				if ctx.Err() == nil {
					st.fail(fmt.Errorf("sending %v at %#x: %w", p.Kind, p.Address, err))
				}
				return false
			}
			return true
		}
		for n := 0; ; n++ {
			off := n * 256 % dmaLen
			if !send(tlp.Packet{Kind: tlp.MWr, Address: dmaBase + uint64(off), Data: data[off : off+256]}) {
				return
			}
			if n%8 == 0 && !send(tlp.Packet{Kind: tlp.MRd, Tag: uint16(n/8) & 0xff, Address: dmaBase + uint64(off&^511), Length: 128}) {
				return
			}
			if n%16 == 0 && !send(outside[n/16%len(outside)]) {
				return
			}
		}
	}()
	return st
}

func (st *storm) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = err
	}
}

// failed returns the first error the storm met.
func (st *storm) failed() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// stop ends the storm and returns the first error it met.
func (st *storm) stop() error {
	st.gpu.ignoreCompletions() // its reads' last completions find no reader
	st.cancel()
	st.wg.Wait()
	return st.failed()
}

// serverGoroutines counts the goroutines running under the test's server
// label (Run and what it started).
func serverGoroutines(t *testing.T) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	// debug=1 groups identical stacks: "N @ pcs" then "# labels: {...}".
	label := fmt.Sprintf("%q:%q", serverLabel, t.Name())
	n := 0
	var count int
	for _, line := range strings.Split(buf.String(), "\n") {
		if _, err := fmt.Sscanf(line, "%d @", &count); err == nil {
			continue
		}
		if strings.HasPrefix(line, "# labels:") && strings.Contains(line, label) {
			n += count
		}
	}
	return n
}

// memfdMappings counts this process's mappings of the test's guest RAM.
func memfdMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/memfd:"+memfdName(t)+" ")
}

// TestQEMUDiesMidDMA: QEMU goes away while the device streams DMA into and
// out of guest RAM: its socket closes between messages (a clean close, as
// on unplug: nil), in the middle of a message (ErrQEMUGone naming the
// part), or while its vCPU waits for a BAR read's answer (ErrQEMUGone
// naming the access). In each case Run returns with its goroutines gone;
// the device's TLPs after the end are dropped and counted, and touch no
// guest memory; no byte outside the DMA's target ever changed; and once
// the server's RAM is released, a DMA reaches nothing (no SIGSEGV).
func TestQEMUDiesMidDMA(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		die   func(q *fakeQEMU) error
		check func(t *testing.T, rg *rig, err error)
	}{
		{"closed between messages", func(q *fakeQEMU) error { q.close(); return nil },
			func(t *testing.T, _ *rig, err error) {
				if err != nil {
					t.Errorf("Run ended with %v, want nil (a close between messages)", err)
				}
			}},
		{"truncated payload", func(q *fakeQEMU) error {
			m := AppendMsg(nil, Msg{Cmd: BarRead, Bar: BarAccess{Addr: bar0Guest, Size: 4, Memory: true}})
			_, err := unix.Write(q.fd, m[:HeaderLen+10])
			q.close()
			return err
		}, func(t *testing.T, _ *rig, err error) {
			if !errors.Is(err, ErrQEMUGone) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(fmt.Sprint(err), "BAR_READ payload") {
				t.Errorf("Run ended with %v, want ErrQEMUGone, unexpected EOF in BAR_READ's payload", err)
			}
		}},
		{"truncated header", func(q *fakeQEMU) error {
			m := AppendMsg(nil, Msg{Cmd: CfgRead, Cfg: CfgAccess{Addr: 0, Len: 4}})
			_, err := unix.Write(q.fd, m[:7])
			q.close()
			return err
		}, func(t *testing.T, _ *rig, err error) {
			if !errors.Is(err, ErrQEMUGone) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(fmt.Sprint(err), "message header") {
				t.Errorf("Run ended with %v, want ErrQEMUGone, unexpected EOF in a message header", err)
			}
		}},
		{"died waiting for a BAR read", func(q *fakeQEMU) error {
			// The request is read before the close is seen; the answer
			// finds nobody.
			_, err := unix.Write(q.fd, AppendMsg(nil, Msg{Cmd: BarRead, Bar: BarAccess{Addr: bar0Guest + 0x40, Size: 4, Memory: true}}))
			q.close()
			return err
		}, func(t *testing.T, rg *rig, err error) {
			if !errors.Is(err, ErrQEMUGone) || !strings.Contains(fmt.Sprint(err), "BAR_READ of 4 bytes at 0xfc000040") {
				t.Errorf("Run ended with %v, want ErrQEMUGone naming the BAR read at 0xfc000040", err)
			}
			if n := rg.srv.Stats().LostAnswers.Load(); n != 1 {
				t.Errorf("%d lost answers counted, want 1", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rg := newRig(t)
			for i := range rg.mem {
				rg.mem[i] = fillByte(i)
			}
			ps, ss := rg.port.Stats(), rg.srv.Stats()
			st := startStorm(t, rg)
			defer st.stop()
			waitfor.Progress(t, "the device's DMA into guest RAM", func() (bool, uint64) {
				if err := st.failed(); err != nil {
					t.Fatalf("the device's DMA: %v", err)
				}
				w, r, o := ps.DMAWrites.Load(), ps.DMAReads.Load(), ps.DMAOutside.Load()
				return w >= 64 && r >= 8 && o >= 4, w + r + o
			})
			if err := tc.die(rg.q); err != nil {
				t.Fatal(err)
			}
			var runErr error
			waitfor.Until(t, "Run to return after QEMU went away", func() bool {
				select {
				case runErr = <-rg.serverErr:
					return true
				default:
					return false
				}
			})
			from := ss.DroppedAfterEnd.Load()
			tc.check(t, rg, runErr)
			waitfor.Until(t, "the server's goroutines to end", func() bool { return serverGoroutines(t) == 0 })

			// The device goes on: what it sends now is dropped, counted,
			// and changes nothing in guest RAM.
			// (Its reads get no completion: it stalls once their
			// timeouts hold every tag, so not too many.)
			after := append([]byte(nil), rg.mem...)
			waitfor.Progress(t, "TLPs dropped after the end", func() (bool, uint64) {
				n := ss.DroppedAfterEnd.Load()
				return n >= from+64, n
			})
			if err := st.stop(); err != nil {
				t.Fatal(err)
			}
			if i := firstChange(after, rg.mem, 0); i >= 0 {
				t.Errorf("guest RAM byte %#x changed after Run returned: %#x -> %#x", i, after[i], rg.mem[i])
			}
			for i, b := range rg.mem {
				inside := i >= dmaBase && i < dmaBase+dmaLen
				if b != fillByte(i) && (!inside || b != dmaByte(i)) {
					t.Fatalf("guest RAM byte %#x holds %#x: neither the fill %#x nor the device's %#x (target %#x-%#x)",
						i, b, fillByte(i), dmaByte(i), dmaBase, dmaBase+dmaLen)
				}
			}
			if firstChange(after[dmaBase:dmaBase+dmaLen], fillPattern(dmaBase, dmaLen), 0) < 0 {
				t.Error("the device's writes never reached guest RAM")
			}

			// Releasing the server's RAM unmaps it; a DMA then reaches nothing.
			if n := memfdMappings(t); n != 2 {
				t.Fatalf("%d mappings of the guest's memfd before release, want 2 (the fake QEMU's, the server's)", n)
			}
			if err := rg.ram.Close(); err != nil {
				t.Fatal(err)
			}
			if n := memfdMappings(t); n != 1 {
				t.Fatalf("%d mappings of the guest's memfd after ram.Close, want 1 (the fake QEMU's)", n)
			}
			outsideBefore := ps.DMAOutside.Load()
			wr, _ := (&tlp.Packet{Kind: tlp.MWr, RequesterID: gpuID, Address: dmaBase, FirstBE: 0xf, LastBE: 0xf, Data: make([]byte, 64)}).AppendTo(nil)
			if _, err := rg.port.Receive(wr, func([]byte) error { return nil }); !errors.Is(err, vmm.ErrOutsideRAM) {
				t.Errorf("a DMA write into released RAM: %v, want ErrOutsideRAM", err)
			}
			if ps.DMAOutside.Load() != outsideBefore+1 {
				t.Error("the DMA into released RAM was not counted")
			}
			t.Logf("DMA writes %d, reads %d, refused %d; dropped after the end %d; run: %v",
				ps.DMAWrites.Load(), ps.DMAReads.Load(), ps.DMAOutside.Load(), ss.DroppedAfterEnd.Load(), runErr)
		})
	}
}

func fillPattern(from, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = fillByte(from + i)
	}
	return b
}

// firstChange returns the first index at or after from where a and b
// differ, or -1.
func firstChange(a, b []byte, from int) int {
	for i := from; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
