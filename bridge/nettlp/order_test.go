package nettlp

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
)

// TestTargetReadDoesNotPassWrite sends a posted write on one tag port and,
// at once, a read of the same bytes on another, 2000 times with fresh
// data each time, while busy goroutines compete with the target's: every
// read must return what the write before it wrote (PCIe: a read never
// passes a posted write). A target that served each port in its own
// goroutine let the read run first under load.
func TestTargetReadDoesNotPassWrite(t *testing.T) {
	mem := newTestMemory(t, 0, 1<<20)
	startTarget(t, targetAddr, mem, CompleterConfig{})
	wc := dialTag(t, clientAddr, targetAddr, 3)
	rc := dialTag(t, clientAddr, targetAddr, 9)

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.NumCPU())))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { // keep the scheduler busy beside the target
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if n%1024 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	defer wg.Wait()
	defer cancel()

	const addr = 0x4000
	want := make([]byte, 8)
	got := make([]byte, 8)
	for i := range 2000 {
		binary.LittleEndian.PutUint64(want, 0xdeadbeef00000000|uint64(i+1))
		if _, err := wc.Write(addr, want); err != nil {
			t.Fatalf("iteration %d: write: %v", i, err)
		}
		if _, err := rc.Read(addr, got); err != nil {
			t.Fatalf("iteration %d: read: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: the read on tag 9 returned % x, the write before it on tag 3 wrote % x: the read passed the posted write", i, got, want)
		}
	}
}
