package pool

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Rules for (re-)registering a bridge, which decide whether the switch and
// the agents still describe the live pairs afterwards:
//
//   - two bridges (box or host) may not share an endpoint: the same switch
//     port and MAC, or the same IP and UDP port, would make the forwarding
//     table send both ends of a pair to one place;
//   - a bridge with GPUs lent keeps its endpoint and agent URL: the table,
//     the agents and the journal all name them;
//   - a lent GPU keeps every field it was lent with; a field left empty (or
//     zero) in the new registration keeps its value, a different value is
//     refused.

// sameMAC compares two MAC strings by value ("02-00-..." equals "02:00:...").
func sameMAC(a, b string) bool {
	x, errX := net.ParseMAC(a)
	y, errY := net.ParseMAC(b)
	if errX != nil || errY != nil {
		return strings.EqualFold(a, b)
	}
	return slices.Equal(x, y)
}

// sameEndpoint: the bridge is reached at the same place.
func sameEndpoint(a, b Endpoint) bool {
	return a.SwitchPort == b.SwitchPort && sameMAC(a.MAC, b.MAC) && a.IP == b.IP && a.UDPPort == b.UDPPort
}

func (e Endpoint) String() string {
	s := fmt.Sprintf("switch_port %q mac %s", e.SwitchPort, e.MAC)
	if e.IP != "" {
		s += " ip " + e.IP + ":" + strconv.Itoa(int(e.UDPPort))
	}
	return s
}

// clash says how e collides with other, or "" if it does not.
func clash(e, other Endpoint) string {
	if e.SwitchPort == other.SwitchPort && sameMAC(e.MAC, other.MAC) {
		return fmt.Sprintf("switch_port %q and mac %s", e.SwitchPort, e.MAC)
	}
	if e.IP != "" && e.IP == other.IP && e.UDPPort == other.UDPPort {
		return fmt.Sprintf("ip:udp_port %s:%d", e.IP, e.UDPPort)
	}
	return ""
}

// clashLocked refuses an endpoint that another bridge has; kind ("box" or
// "host") and id name the registering bridge, which may keep its own.
func (p *Pool) clashLocked(kind, id string, e Endpoint) error {
	for _, bs := range p.boxOrder {
		if kind == "box" && bs.ID == id {
			continue
		}
		if what := clash(e, bs.Bridge); what != "" {
			return fmt.Errorf("%w: %s %q: bridge %s is already box %q's", ErrConflict, kind, id, what, bs.ID)
		}
	}
	for _, hs := range p.hosts {
		if kind == "host" && hs.ID == id {
			continue
		}
		if what := clash(e, hs.Bridge); what != "" {
			return fmt.Errorf("%w: %s %q: bridge %s is already host %q's", ErrConflict, kind, id, what, hs.ID)
		}
	}
	return nil
}

// lentMove refuses a new endpoint or agent URL for a bridge whose pairs are
// live; self names the bridge and lent its GPUs and allocations.
func lentMove(self string, oldE, newE Endpoint, oldURL, newURL, lent string) error {
	if !sameEndpoint(oldE, newE) {
		return fmt.Errorf("%w: %s has %s; re-registration may not move its bridge from %s to %s while they are lent (release them first)",
			ErrInUse, self, lent, oldE, newE)
	}
	if oldURL != newURL {
		return fmt.Errorf("%w: %s has %s; re-registration may not change agent_url from %q to %q while they are lent (release them first)",
			ErrInUse, self, lent, oldURL, newURL)
	}
	return nil
}

// keepLentGPU fills the fields a re-registration left empty from the GPU as
// lent, and refuses one that differs.
func keepLentGPU(box string, was GPU, now *GPU, alloc string) error {
	differs := func(field string, a, b any) error {
		return fmt.Errorf("%w: box %q gpu %q is lent to allocation %q as %s %v; re-registration may not change it to %v",
			ErrInUse, box, was.ID, alloc, field, a, b)
	}
	if now.Model != was.Model { // required, so never left empty
		return differs("model", was.Model, now.Model)
	}
	switch {
	case now.MemoryMiB == 0:
		now.MemoryMiB = was.MemoryMiB
	case now.MemoryMiB != was.MemoryMiB:
		return differs("memory_mib", was.MemoryMiB, now.MemoryMiB)
	}
	switch {
	case now.BDF == "":
		now.BDF = was.BDF
	case now.BDF != was.BDF:
		return differs("bdf", was.BDF, now.BDF)
	}
	// A lent GPU cannot move behind the box's PCIe switches; zero means
	// "not said".
	if now.Switch == 0 && now.Port == 0 {
		now.Switch, now.Port = was.Switch, was.Port
	} else if now.Switch != was.Switch || now.Port != was.Port {
		return differs("pcie_switch/pcie_port", fmt.Sprintf("%d/%d", was.Switch, was.Port), fmt.Sprintf("%d/%d", now.Switch, now.Port))
	}
	return nil
}

// lentSummary names a box's lent GPUs and their allocations.
func (bs *boxState) lentSummary() string {
	var gpus, allocs []string
	for _, g := range bs.gpus {
		if g.alloc != "" {
			gpus = append(gpus, g.ID)
			if !slices.Contains(allocs, g.alloc) {
				allocs = append(allocs, g.alloc)
			}
		}
	}
	if len(gpus) == 0 {
		return ""
	}
	slices.Sort(allocs)
	return fmt.Sprintf("gpus %s lent (allocations %s)", strings.Join(gpus, ","), strings.Join(allocs, ","))
}

// hostLentLocked names the allocations a host holds.
func (p *Pool) hostLentLocked(host string) string {
	var allocs []string
	for _, a := range p.allocs {
		if a.Host == host {
			allocs = append(allocs, a.ID)
		}
	}
	if len(allocs) == 0 {
		return ""
	}
	slices.Sort(allocs)
	return "gpus lent to it (allocations " + strings.Join(allocs, ",") + ")"
}
