package tlp

import "fmt"

// ID is a PCIe routing ID (bus, device, function): bus in bits 15:8, device
// in 7:3, function in 2:0. Requester, completer and config target IDs all use
// it.
type ID uint16

// NewID builds an ID from its parts; out-of-range device or function bits are
// masked.
func NewID(bus, dev, fn uint8) ID {
	return ID(uint16(bus)<<8 | uint16(dev&0x1f)<<3 | uint16(fn&7))
}

// Bus returns the bus number.
func (id ID) Bus() uint8 { return uint8(id >> 8) }

// Device returns the device number (0..31).
func (id ID) Device() uint8 { return uint8(id>>3) & 0x1f }

// Function returns the function number (0..7).
func (id ID) Function() uint8 { return uint8(id) & 7 }

// String formats the ID as "bb:dd.f" in lowercase hex.
func (id ID) String() string {
	return fmt.Sprintf("%02x:%02x.%x", id.Bus(), id.Device(), id.Function())
}

// ParseID parses "bb:dd.f" (hex).
func ParseID(s string) (ID, error) {
	var b, d, f uint
	n, err := fmt.Sscanf(s, "%x:%x.%x", &b, &d, &f)
	if err != nil || n != 3 || b > 0xff || d > 0x1f || f > 7 {
		return 0, fmt.Errorf("tlp: bad routing ID %q: want bb:dd.f in hex", s)
	}
	return NewID(uint8(b), uint8(d), uint8(f)), nil
}

// Status is a completion status (DW1 bits 15:13 of a completion).
type Status uint8

// Completion statuses; other values are reserved.
const (
	StatusSC  Status = 0 // successful completion
	StatusUR  Status = 1 // unsupported request
	StatusCRS Status = 2 // configuration request retry (RRS from PCIe 6.0)
	StatusCA  Status = 4 // completer abort
)

func (s Status) String() string {
	switch s {
	case StatusSC:
		return "SC"
	case StatusUR:
		return "UR"
	case StatusCRS:
		return "CRS"
	case StatusCA:
		return "CA"
	}
	return fmt.Sprintf("%d", uint8(s))
}

// Routing is the routing of a message (Type[2:0] of Msg/MsgD).
type Routing uint8

// Message routings.
const (
	RouteToRC      Routing = 0 // routed to root complex
	RouteByAddress Routing = 1
	RouteByID      Routing = 2
	RouteBroadcast Routing = 3 // broadcast from root complex
	RouteLocal     Routing = 4 // terminate at receiver
	RouteGather    Routing = 5 // gathered and routed to root complex
)

// Class is a flow-control class.
type Class uint8

// Flow-control classes.
const (
	Posted Class = iota
	NonPosted
	Completion
)

func (c Class) String() string {
	switch c {
	case Posted:
		return "P"
	case NonPosted:
		return "NP"
	case Completion:
		return "Cpl"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// MarshalText writes the ID as "bb:dd.f".
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads "bb:dd.f".
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}
