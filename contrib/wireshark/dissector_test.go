package wireshark

import (
	"path/filepath"
	"testing"

	"github.com/dxpu/dxpu/internal/shareddata"
)

// TestCommittedCaptures dissects every capture under testdata/pcap (all
// TLP kinds, both dxpu encapsulations with and without VLAN tags, NetTLP,
// a snap length that cuts TLPs) and compares every field with dxpu's
// decoder.
func TestCommittedCaptures(t *testing.T) {
	t.Parallel()
	tshark := tsharkPath(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "pcap", "*.pcap*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no captures under testdata/pcap")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			n := checkCapture(t, tshark, file)
			t.Logf("compared %+v", n)
			if n.tlps == 0 {
				t.Errorf("no TLP compared (%+v)", n)
			}
		})
	}
}

// TestNetTLPHardwareCaptures does the same over the NetTLP captures of
// real NICs and SSDs (128-byte snap length: payloads are cut).
func TestNetTLPHardwareCaptures(t *testing.T) {
	t.Parallel()
	tshark := tsharkPath(t)
	files := shareddata.NetTLPCaptures(t)
	var total tally
	for _, file := range files {
		total.add(checkCapture(t, tshark, file))
	}
	t.Logf("compared %+v over %d captures", total, len(files))
	if total.tlps == 0 || total.truncated == 0 {
		t.Errorf("the hardware captures should give TLPs, some cut by the snap length: %+v", total)
	}
}
