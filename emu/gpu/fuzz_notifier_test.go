package gpu

import (
	"strings"
	"testing"
)

// FuzzDecodeNotifier decodes arbitrary notifier records (read back from
// host memory, where anything on the PCIe side may have written).
// Invariants: a record decodes to a fault whose encoding decodes to the
// same fault (its word's other bits dropped); the fault's text is one
// non-empty line.
func FuzzDecodeNotifier(f *testing.F) {
	f.Add(AppendNotifier(nil, ChannelFault{}))
	f.Add(AppendNotifier(nil, ChannelFault{Reason: FaultRingFetch, Status: 4, Addr: 0x1000}))
	f.Add(AppendNotifier(nil, ChannelFault{Reason: FaultCopyRead, Status: 1, VRAM: true, Addr: 0xdead0000}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := DecodeNotifier(b)
		if len(b) < NotifierBytes && c != (ChannelFault{}) {
			t.Fatalf("%d bytes decoded as %+v", len(b), c)
		}
		if again := DecodeNotifier(AppendNotifier(nil, c)); again != c {
			t.Fatalf("%+v re-encodes to %+v", c, again)
		}
		if s := c.String(); s == "" || strings.ContainsAny(s, "\r\n") {
			t.Fatalf("fault text %q", s)
		}
	})
}
