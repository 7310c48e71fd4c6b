package vmm

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestGuestRAMCloseWhileDMA: the device's accesses race the release of
// the guest's memfd mapping (QEMU gone, the server ending): each either
// completes on the mapping or finds no RAM, never a SIGSEGV on an
// unmapped page (the test process would crash), and after Close none
// succeeds. The memfd's pages, still mapped by "QEMU", changed only at
// the addressed range.
func TestGuestRAMCloseWhileDMA(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	fd, err := unix.MemfdCreate("dxpu-guestram-close", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	qemu, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(qemu)
	reg, unmap, err := MapFD(fd, 0x10_0000, size, 0)
	if err != nil {
		t.Fatal(err)
	}
	var unmapped atomic.Int32
	var ram GuestRAM
	if err := ram.Replace([]RAMRegion{reg}, func() { unmapped.Add(1); unmap() }); err != nil {
		t.Fatal(err)
	}

	const target, n = 0x10_0000 + 0x4000, 4096
	var ok, wrote, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = 0xa0 | byte(w)
			}
			<-start
			for refusedHere := 0; refusedHere < 100; {
				var err error
				if w%2 == 0 {
					err = ram.WriteAt(buf, target)
				} else {
					err = ram.ReadAt(buf, target)
				}
				switch {
				case err == nil:
					ok.Add(1)
					if w%2 == 0 {
						wrote.Add(1)
					}
				case errors.Is(err, ErrOutsideRAM):
					refused.Add(1)
					refusedHere++
				default:
					t.Errorf("access: %v", err)
					return
				}
			}
		}()
	}
	close(start)
	waitfor.Progress(t, "accesses before Close", func() (bool, uint64) {
		return ok.Load()-wrote.Load() >= 50 && wrote.Load() >= 50, uint64(ok.Load())
	})
	if refused.Load() > 0 {
		t.Fatal("accesses refused before Close")
	}
	if err := ram.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if unmapped.Load() != 1 {
		t.Errorf("the mapping was released %d times, want 1", unmapped.Load())
	}
	if ram.Size() != 0 {
		t.Errorf("%d bytes still mapped after Close", ram.Size())
	}
	before := ok.Load()
	if err := ram.WriteAt([]byte{1}, target); !errors.Is(err, ErrOutsideRAM) {
		t.Errorf("a write after Close: %v, want ErrOutsideRAM", err)
	}
	if ok.Load() != before {
		t.Error("an access succeeded after Close")
	}
	for i, b := range qemu {
		inside := i >= target-0x10_0000 && i < target-0x10_0000+n
		if (!inside && b != 0) || (inside && b != 0xa0 && b != 0xa2) {
			t.Fatalf("guest byte %#x holds %#x after the race (target %#x, %d bytes)", i, b, target, n)
		}
	}
}
