package pool

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dxpu/dxpu/sim"
)

// MinHostPorts is the least number of virtual downstream ports a host bridge
// must expose.
const MinHostPorts = 32

// MaxPairID is the largest 24-bit pair ID; 0 is never used.
const MaxPairID = 1<<24 - 1

// Endpoint is where a bridge is reached on the fabric: the switch port it is
// cabled to, its MAC and IPv4 address, and the UDP port it listens on for
// routed encapsulation (0 for raw EtherType only).
type Endpoint struct {
	SwitchPort string `json:"switch_port"`
	MAC        string `json:"mac"`
	IP         string `json:"ip,omitempty"`
	UDPPort    uint16 `json:"udp_port,omitempty"`
}

// Validate reports what is wrong with e; field names the JSON path.
func (e Endpoint) Validate(field string) error {
	if e.SwitchPort == "" {
		return invalidf("%s.switch_port is required", field)
	}
	if e.MAC == "" {
		return invalidf("%s.mac is required", field)
	}
	hw, err := net.ParseMAC(e.MAC)
	if err != nil || len(hw) != 6 {
		return invalidf("%s.mac %q is not an Ethernet MAC address", field, e.MAC)
	}
	if e.IP != "" {
		a, err := netip.ParseAddr(e.IP)
		if err != nil || !a.Is4() {
			return invalidf("%s.ip %q is not an IPv4 address", field, e.IP)
		}
	}
	return nil
}

// Location is where a bridge sits in the datacenter network.
type Location struct {
	Pod  string `json:"pod,omitempty"`
	Rack string `json:"rack,omitempty"` // the rack, or equally its ToR switch
}

// Health of a GPU.
type Health string

const (
	Healthy   Health = "healthy"
	Unhealthy Health = "unhealthy"
)

// GPU is one GPU behind a box's PCIe switch.
type GPU struct {
	ID        string `json:"id"`
	Model     string `json:"model"`
	MemoryMiB uint64 `json:"memory_mib"`
	BDF       string `json:"bdf"`         // bus/device/function inside the box, e.g. 0000:41:00.0
	Switch    int    `json:"pcie_switch"` // which PCIe switch of the box it sits behind
	Port      int    `json:"pcie_port"`   // downstream port of that switch
	Health    Health `json:"health,omitempty"`
	Box       string `json:"box,omitempty"` // filled in by the pool
	// Unreachable is set, in the manager's answers only, while the GPU's
	// box agent has not answered past the manager's bound: the manager
	// cannot vouch for the GPU, but Health stays what evidence about the
	// GPU itself says and the GPU stays lent.
	Unreachable *Unreachable `json:"unreachable,omitempty"`
	// Allocation holds the allocation the GPU is lent to; filled in by the
	// pool on read, never stored with the box.
	Allocation string `json:"allocation,omitempty"`
}

// Box is a GPU-side bridge and the GPUs behind it.
type Box struct {
	ID     string   `json:"id"`
	Bridge Endpoint `json:"bridge"`
	// AgentURL is where the box bridge's agent API listens (see
	// fabric/manager/agentapi); empty if the bridge only follows the table.
	AgentURL string   `json:"agent_url,omitempty"`
	Location Location `json:"location"`
	GPUs     []GPU    `json:"gpus"`
	Draining bool     `json:"draining,omitempty"`
	// Unreachable is set, in the manager's answers only (never stored),
	// while the box's agent has not answered past the manager's bound.
	Unreachable *Unreachable `json:"unreachable,omitempty"`
}

// Unreachable says since when and why a box's agent does not answer.
type Unreachable struct {
	Since  time.Time `json:"since"` // the first failed contact of the run
	Reason string    `json:"reason"`
}

// Host is a host-side bridge.
type Host struct {
	ID       string   `json:"id"`
	Bridge   Endpoint `json:"bridge"`
	AgentURL string   `json:"agent_url,omitempty"` // the host bridge's agent API`
	Location Location `json:"location"`
	Ports    int      `json:"ports"` // virtual downstream ports, at least MinHostPorts
	// UsedPorts is filled in by the pool on read.
	UsedPorts int `json:"used_ports,omitempty"`
}

// RTT is a measured round-trip time between a host bridge and a box bridge.
type RTT struct {
	Host string   `json:"host"`
	Box  string   `json:"box"`
	RTT  Duration `json:"rtt"`
}

// Request asks for Count GPUs for Host.
type Request struct {
	Host         string   `json:"host"`
	Count        int      `json:"count"`
	Model        string   `json:"model,omitempty"`
	MinMemoryMiB uint64   `json:"min_memory_mib,omitempty"`
	SameBox      bool     `json:"same_box,omitempty"`
	MaxRTT       Duration `json:"max_rtt,omitempty"`
	Spread       bool     `json:"spread,omitempty"`
	// RequestID makes the request idempotent: while an allocation made
	// for the same RequestID exists, Reserve returns it (ErrDuplicate)
	// instead of lending more GPUs, so a client may retry after a timeout.
	RequestID string `json:"request_id,omitempty"`
}

// Validate checks the request on its own, without the pool.
func (r Request) Validate() error {
	if r.Host == "" {
		return invalidf("host is required")
	}
	if r.Count <= 0 {
		return invalidf("count must be at least 1, got %d", r.Count)
	}
	if r.SameBox && r.Spread {
		return invalidf("same_box and spread exclude each other")
	}
	if r.MaxRTT < 0 {
		return invalidf("max_rtt must not be negative")
	}
	if len(r.RequestID) > 128 {
		return invalidf("request_id is longer than 128 bytes")
	}
	if len(r.Model) > 128 {
		return invalidf("model %.16q... is longer than 128 bytes", r.Model)
	}
	for i, c := range r.Model {
		if !unicode.IsPrint(c) || c == utf8.RuneError {
			return invalidf("model %q: character %q at offset %d does not print; no GPU model holds one", r.Model, c, i)
		}
	}
	return nil
}

// State of an allocation.
type State string

const (
	StatePending   State = "pending"   // reserved; saga in progress
	StateActive    State = "active"    // every pair programmed and hot-added
	StateReleasing State = "releasing" // being torn down
	// StateDegraded is never stored: the manager answers it for an active
	// allocation with a pair whose link has been down past its bound
	// (Allocation.Degraded says which and why).
	StateDegraded State = "degraded"
)

// Assignment is one GPU lent to a host: one host-GPU pair.
type Assignment struct {
	GPU      string `json:"gpu"`
	Box      string `json:"box"`
	Pair     uint32 `json:"pair"`      // 24-bit pair ID
	HostPort int    `json:"host_port"` // virtual downstream port on the host bridge
}

// Allocation is a set of GPUs lent to one host.
type Allocation struct {
	ID      string       `json:"id"`
	Host    string       `json:"host"`
	State   State        `json:"state"`
	GPUs    []Assignment `json:"gpus"`
	Request Request      `json:"request"`
	// Lost lists GPUs that failed while lent; their pairs are gone.
	Lost []string `json:"lost,omitempty"`
	// Degraded is set, with State degraded, in the manager's answers
	// while pairs of the allocation are down past the bound; never stored.
	Degraded *Degradation `json:"degraded,omitempty"`
}

// Degradation says why an allocation is degraded.
type Degradation struct {
	Reason string    `json:"reason"`
	Pairs  []uint32  `json:"pairs"` // pairs whose link is down
	Since  time.Time `json:"since"` // when the first of them went down
}

// GPUIDs returns the IDs of the allocation's GPUs.
func (a Allocation) GPUIDs() []string {
	ids := make([]string, len(a.GPUs))
	for i, g := range a.GPUs {
		ids[i] = g.GPU
	}
	return ids
}

// Stats counts the pool's GPUs.
type Stats struct {
	GPUs      int `json:"gpus"`
	Free      int `json:"free"`      // healthy, not lent, box not draining
	Used      int `json:"used"`      // lent (any state)
	Unhealthy int `json:"unhealthy"` // not lent and unhealthy
	Draining  int `json:"draining"`  // healthy, not lent, box draining
	Boxes     int `json:"boxes"`
	// DrainingBoxes counts boxes taking no new allocations: the GPU
	// counts above say nothing of a draining box whose GPUs are all lent.
	DrainingBoxes int `json:"draining_boxes"`
	Hosts         int `json:"hosts"`
	Allocs        int `json:"allocations"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("25us", "1.5ms"; microseconds spelled us as in every dxpu
// output, and read in either spelling); it also reads a bare number as
// nanoseconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return &DurationError{Text: string(b)}
		}
		*d = Duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return &DurationError{Text: string(b)}
	}
	*d = Duration(n)
	return nil
}

// DurationError is a JSON value that is not a duration.
type DurationError struct{ Text string }

func (e *DurationError) Error() string {
	return fmt.Sprintf("duration %s: want a string such as \"20us\" or \"1.5ms\", or integer nanoseconds", e.Text)
}

// String formats d like time.Duration, but with us for microseconds, as
// `dxpu help units` spells them (and as the API takes them back).
func (d Duration) String() string { return sim.FormatDuration(time.Duration(d)) }
