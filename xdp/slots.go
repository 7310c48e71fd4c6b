package xdp

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// quarantine is how long a retired slot stays unused: longer than any XDP
// program run that may still hold a pointer into it (microseconds).
const quarantine = 50 * time.Millisecond

var errNoSlot = errors.New("xdp: no free slot")

// slotPool hands out map slots. Retired slots are reused only after the
// quarantine, so a program that read the old index entry never sees the
// slot rewritten under it.
type slotPool struct {
	free    []uint32
	retired []retiredSlot
	now     func() time.Time
	sleep   func(time.Duration)
}

type retiredSlot struct {
	slot uint32
	at   time.Time
}

func newSlotPool(lo, hi uint32) slotPool {
	p := slotPool{free: make([]uint32, 0, hi-lo), now: time.Now, sleep: time.Sleep}
	for i := hi; i > lo; i-- {
		p.free = append(p.free, i-1)
	}
	return p
}

// get returns the lowest free slot, waiting out the quarantine of a retired
// one if nothing else is left.
func (p *slotPool) get() (uint32, error) {
	if len(p.free) == 0 {
		if len(p.retired) == 0 {
			return 0, errNoSlot
		}
		if wait := quarantine - p.now().Sub(p.retired[0].at); wait > 0 {
			p.sleep(wait)
		}
	}
	p.release()
	if len(p.free) == 0 {
		return 0, errNoSlot
	}
	s := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return s, nil
}

func (p *slotPool) release() {
	now := p.now()
	n := 0
	for _, r := range p.retired {
		if now.Sub(r.at) >= quarantine {
			p.free = append(p.free, r.slot)
			n++
			continue
		}
		break
	}
	p.retired = p.retired[n:]
}

// put returns a slot no program can have seen.
func (p *slotPool) put(s uint32) { p.free = append(p.free, s) }

// retire returns a slot that programs may still be reading.
func (p *slotPool) retire(s uint32) { p.retired = append(p.retired, retiredSlot{s, p.now()}) }

// mmapMap maps an mmapable array map read-write.
func mmapMap(m *ebpf.Map) ([]byte, error) {
	size := int(m.MaxEntries()) * int(m.ValueSize())
	page := unix.Getpagesize()
	size = (size + page - 1) / page * page
	b, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("xdp: mmap of map %s: %w", m, err)
	}
	return b, nil
}

// pairLanes is PAIR_LANES: index entries per pair_index element.
const pairLanes = 32

// setIndex publishes slot+1 (or 0) for pair id with one atomic 32-bit
// store of the aligned word holding its 16-bit entry; the other entry in
// that word is rewritten with the value it already has. Only the loader
// writes the index, under s.mu.
func (s *Switch) setIndex(id uint32, v uint16) {
	off := int(id/pairLanes)*pairLanes*2 + int(id%pairLanes)*2
	word := (*uint32)(unsafe.Pointer(&s.index[off&^3]))
	var b [4]byte
	cur := atomic.LoadUint32(word)
	*(*uint32)(unsafe.Pointer(&b[0])) = cur
	*(*uint16)(unsafe.Pointer(&b[off&3])) = v
	atomic.StoreUint32(word, *(*uint32)(unsafe.Pointer(&b[0])))
}

// indexEntry reads pair id's index entry (for tests).
func (s *Switch) indexEntry(id uint32) uint16 {
	off := int(id/pairLanes)*pairLanes*2 + int(id%pairLanes)*2
	return *(*uint16)(unsafe.Pointer(&s.index[off]))
}
