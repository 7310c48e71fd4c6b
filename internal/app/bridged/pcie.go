package bridged

import (
	"fmt"
	"net/netip"
	"strings"
)

// PCIe kinds: what the bridge's PCIe side is.
const (
	KindNetTLP = "nettlp"  // a real host's NetTLP adapter (host side)
	KindEmuGPU = "emu-gpu" // an emulated GPU on the wall clock (GPU side)
	KindMemory = "memory"  // a memory-backed device (GPU side)
)

// PCIe is the parsed --pcie flag.
type PCIe struct {
	Kind string
	// Local, Remote and DMA are the NetTLP addresses: this bridge's
	// adapter address, the host's adapter, and (when valid) where the
	// requests (DMA) go instead of Remote.
	Local, Remote, DMA netip.Addr
}

// ParsePCIe parses nettlp:LOCAL:REMOTE[:DMAREMOTE], emu-gpu or memory. Its
// errors name the flag.
func ParsePCIe(s string) (PCIe, error) {
	switch s {
	case KindEmuGPU, KindMemory:
		return PCIe{Kind: s}, nil
	}
	parts := strings.Split(s, ":")
	if parts[0] != KindNetTLP {
		return PCIe{}, fmt.Errorf("--pcie %q: want nettlp:LOCAL:REMOTE[:DMAREMOTE], emu-gpu or memory", s)
	}
	if len(parts) != 3 && len(parts) != 4 {
		return PCIe{}, fmt.Errorf("--pcie %q: want nettlp:LOCAL:REMOTE[:DMAREMOTE] (IPv4 addresses)", s)
	}
	sp := PCIe{Kind: KindNetTLP}
	for i, dst := range []*netip.Addr{&sp.Local, &sp.Remote, &sp.DMA}[:len(parts)-1] {
		a, err := netip.ParseAddr(parts[i+1])
		if err != nil || !a.Is4() || a.IsUnspecified() {
			return PCIe{}, fmt.Errorf("--pcie %q: field %d %q: want a specific IPv4 address", s, i+2, parts[i+1])
		}
		*dst = a
	}
	return sp, nil
}
