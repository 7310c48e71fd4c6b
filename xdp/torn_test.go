package xdp_test

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestReconcileNeverTorn flips a pair between two versions (different GPU
// MAC, VLAN and UDP addresses) while frames run through the program
// concurrently: every frame must come out exactly as one version or the
// other would send it, never as a mix, and must never be treated as an
// unknown pair (a changed pair has no gap). The gap it does catch (checked
// by breaking the loader on purpose); a torn rule is ruled out by the
// fresh-slot scheme, but the kernel's copy window is too narrow for this
// test to provoke one reliably.
func TestReconcileNeverTorn(t *testing.T) {
	f := newFixture(t)
	a := switchtest.Table()
	b := switchtest.Table()
	b.Version = 2
	b.Pairs[1].GPU.MAC = net.HardwareAddr{2, 0, 0, 0, 0xb, 0xb}
	b.Pairs[1].VLAN = 7
	b.Pairs[1].GPU.IP = b.Pairs[1].Host.IP
	b.Pairs[1].GPU.UDPPort = 4242
	p := a.Pairs[1]
	frame := switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1,
		&encap.L3{Src: p.Host.IP, Dst: switchtest.PortIP(1), SrcPort: 9000}, encap.MsgTLP, p.ID, true)

	want := func(tb *table.Table) []byte {
		rules, _, err := switching.Compile(tb, f.ports, 0)
		if err != nil {
			t.Fatal(err)
		}
		fwd := switching.NewForwarder(0)
		fwd.Update(rules)
		buf := append(make([]byte, switching.Headroom), frame...)
		res := fwd.Forward(buf, switching.Headroom, f.ports[switchtest.P1].Index)
		if res.Verdict != switching.VerdictForward {
			t.Fatalf("fixture frame not forwarded: %v", res.Reason)
		}
		return buf[res.Off:]
	}
	wantA, wantB := want(a), want(b)
	if bytes.Equal(wantA, wantB) {
		t.Fatal("the two versions must rewrite differently")
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var recErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		recErr = f.ns.Do(func() error {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return nil
				default:
				}
				tb := a
				if i%2 == 1 {
					tb = b
				}
				if _, err := f.sw.Reconcile(tb, f.ports); err != nil {
					return err
				}
			}
		})
	}()
	var seenA, seenB int
	err := f.ns.Do(func() error {
		for i := 0; i < 20000; i++ {
			act, out, err := f.sw.TestRun(frame, f.ports[switchtest.P1].Index)
			if err != nil {
				return err
			}
			switch {
			case act == switching.XDPRedirect && bytes.Equal(out, wantA):
				seenA++
			case act == switching.XDPRedirect && bytes.Equal(out, wantB):
				seenB++
			default:
				return fmt.Errorf("run %d: action %d, frame matches neither version:\n% x", i, act, out)
			}
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if recErr != nil {
		t.Fatal(recErr)
	}
	t.Logf("%d frames as version A, %d as version B", seenA, seenB)
}
