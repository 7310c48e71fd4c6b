package host

import (
	"testing"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// TestWatchFiresOnTouchingWritesOnly watches two words far apart: writes
// between, before and after them fire nothing; a write touching a
// watched word's last byte fires it once; a watch added by a firing one
// is honoured by a later write.
func TestWatchFiresOnTouchingWritesOnly(t *testing.T) {
	t.Parallel()
	_, rc, up := dmaRig(t, pcie.ReceiverFunc(func(tlp.View) {}))
	write := func(addr uint64, n int) {
		up.SendTLP(pcie.AppendMWr(nil, tlp.NewID(3, 0, 0), addr, make([]byte, n)))
		rc.Sim().Run(-1)
	}
	var fired []string
	rc.Watch(0x1000, func() {
		fired = append(fired, "a")
		rc.Watch(0x1000, func() { fired = append(fired, "a2") })
	})
	rc.Watch(0x9008, func() { fired = append(fired, "b") })
	write(0x2000, 256) // between
	write(0x0f00, 256) // ends just below a
	write(0x9010, 256) // starts just above b
	if len(fired) != 0 {
		t.Fatalf("writes that touch no watched word fired %v", fired)
	}
	write(0x9000, 16) // touches b's last byte
	write(0x9000, 16) // b is gone
	write(0x0ffc, 8)  // touches a's first 4 bytes
	write(0x1004, 4)  // touches the word a re-watched
	if want := "a b a2"; len(fired) != 3 || fired[0] != "b" || fired[1] != "a" || fired[2] != "a2" {
		t.Fatalf("fired %v, want b, a, a2 (in order of writes; %s)", fired, want)
	}
}

// BenchmarkDMAWriteWatched is a 256-byte posted write while the CPU
// watches a semaphore elsewhere, as during a device-to-host copy.
func BenchmarkDMAWriteWatched(b *testing.B) {
	s, rc, up := dmaRig(b, pcie.ReceiverFunc(func(tlp.View) {}))
	rc.Watch(1<<30, func() {})
	w := pcie.AppendMWr(nil, tlp.NewID(3, 0, 0), 0x10000, make([]byte, 256))
	b.SetBytes(256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		up.SendTLP(w)
		if i%64 == 63 {
			s.Run(-1)
		}
	}
}
