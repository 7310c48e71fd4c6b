// Package table is the forwarding table that the control plane hands to the
// switch: one entry per host-GPU pair, keyed by the 24-bit pair ID that every
// dxpu frame carries. The manager produces it, `dxpu switch` (XDP maps or the
// userspace path) consumes it.
package table

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
)

// MaxPairID is the largest pair ID a dxpu frame can carry (24 bits).
const MaxPairID = 1<<24 - 1

// Endpoint is one bridge of a pair as the switch sees it: the switch port
// (interface name) it sits behind, its MAC address and, for UDP
// encapsulation, its IPv4 address and UDP port.
type Endpoint struct {
	Port    string           `json:"port"`
	MAC     net.HardwareAddr `json:"mac"`
	IP      netip.Addr       `json:"ip,omitzero"`
	UDPPort uint16           `json:"udp_port,omitempty"`
}

// Pair is one forwarding entry. Frames with this pair ID are accepted only
// from Host (to GPU) or from GPU (to Host), on that endpoint's port and from
// its MAC; anything else with this ID is spoofed and dropped.
type Pair struct {
	ID   uint32   `json:"id"`
	Host Endpoint `json:"host"`
	GPU  Endpoint `json:"gpu"`
	// VLAN is the 802.1Q VLAN ID frames carry on egress (0: untagged).
	VLAN uint16 `json:"vlan,omitempty"`
	// DropPPM drops this many frames per million, for fault-injection tests.
	DropPPM uint32 `json:"drop_ppm,omitempty"`
}

// Table is a versioned set of pairs. Version increases with every change so
// that watchers can tell whether they are current.
type Table struct {
	Version uint64 `json:"version"`
	Pairs   []Pair `json:"pairs"`
}

// ErrInvalid is returned (wrapped) by Validate.
var ErrInvalid = errors.New("table: invalid")

// Validate checks pair IDs (non-zero, 24 bits, unique) and endpoints.
func (t *Table) Validate() error {
	seen := make(map[uint32]bool, len(t.Pairs))
	for i, p := range t.Pairs {
		if p.ID == 0 || p.ID > MaxPairID {
			return fmt.Errorf("%w: pairs[%d].id %d outside 1..%d", ErrInvalid, i, p.ID, MaxPairID)
		}
		if seen[p.ID] {
			return fmt.Errorf("%w: pairs[%d].id %d appears twice", ErrInvalid, i, p.ID)
		}
		seen[p.ID] = true
		for side, e := range map[string]Endpoint{"host": p.Host, "gpu": p.GPU} {
			if e.Port == "" {
				return fmt.Errorf("%w: pairs[%d].%s.port is empty", ErrInvalid, i, side)
			}
			if len(e.MAC) != 6 {
				return fmt.Errorf("%w: pairs[%d].%s.mac %q is not a 6-byte MAC", ErrInvalid, i, side, e.MAC)
			}
			if e.IP.IsValid() && !e.IP.Is4() {
				return fmt.Errorf("%w: pairs[%d].%s.ip %s is not IPv4", ErrInvalid, i, side, e.IP)
			}
		}
		if p.VLAN > 4094 {
			return fmt.Errorf("%w: pairs[%d].vlan %d outside 0..4094", ErrInvalid, i, p.VLAN)
		}
		if p.DropPPM > 1_000_000 {
			return fmt.Errorf("%w: pairs[%d].drop_ppm %d above 1000000", ErrInvalid, i, p.DropPPM)
		}
	}
	return nil
}

// Sorted returns a copy of the pairs ordered by ID.
func (t *Table) Sorted() []Pair {
	out := append([]Pair(nil), t.Pairs...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
