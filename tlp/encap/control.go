package encap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// CONTROL message bodies (message type 5). The body of a CONTROL frame is
// one control message; all fields are big-endian.
//
// Every control message starts with the same 12 bytes:
//
//	off len field
//	  0   1 control type: 1 HELLO, 2 HELLO-ACK, 3 KEEPALIVE, 4 KEEPALIVE-ACK, 5 RESET
//	  1   1 control version (= 1)
//	  2   1 role of the sender: 1 host side, 2 GPU side
//	  3   1 type-specific: tag bits (8 or 10) for HELLO and HELLO-ACK, reason for RESET,
//	        probe number for KEEPALIVE (echoed by its KEEPALIVE-ACK; 0 = plain keepalive)
//	  4   4 session: the sender's session nonce (non-zero, new on every (re)start of the link)
//	  8   4 peer session: the receiver's session as the sender knows it (0 = not known yet)
//
// KEEPALIVE and KEEPALIVE-ACK are exactly these 12 bytes. A KEEPALIVE asks
// the peer for an immediate KEEPALIVE-ACK carrying the same probe number;
// both refresh the acknowledgement and credit fields of the fixed header, so
// a KEEPALIVE doubles as a credit probe for a sender stalled on credits and
// as the retransmission-timeout probe: the KEEPALIVE-ACK of probe n
// acknowledges everything its peer received before KEEPALIVE n.
//
// RESET is these 12 bytes too; byte 3 carries the reason (1 administrative,
// 2 frame for an unknown session, 3 protocol error, 4 link declared down). A
// bridge receiving a RESET whose peer session matches its own session (or is
// 0 from a peer that restarted) tears the session down and handshakes anew.
//
// HELLO and HELLO-ACK are 40 bytes (HelloLen):
//
//	off len field
//	  0  12 common part (byte 3: tag bits the sender's side accepts in requests, 8 or 10)
//	 12   2 window: TLPs the sender can hold out of order (its reorder window)
//	 14   2 max TLP: the largest TLP in bytes (header, payload, digest) it accepts
//	 16   4 initial sequence number the sender will use for its first TLP
//	 20   2 PH initial credits   22 2 NPH initial credits   24 2 CplH initial credits
//	 26   1 infinite mask (bit t set: credit type t infinite, t as in the header)
//	 27   1 reserved, 0
//	 28   4 PD initial credits   32 4 NPD initial credits   36 4 CplD initial credits
//
// Initial credits are absolute amounts (data in 16-byte units) the sender's
// receive buffers hold; the cumulative limits in the fixed header of every
// later frame count up from them. Bytes 12-13 must not be 0, bytes 14-15 not
// below 16, byte 3 must be 8 or 10.
//
// The handshake: each side sends HELLO (peer session 0, or the one it
// learned) every hello interval while it is not up. A side that receives a
// HELLO answers with HELLO-ACK echoing the HELLO's session. A side is up once
// it receives a HELLO or HELLO-ACK whose peer session equals its own
// session; it then also answers with a HELLO-ACK so the peer gets the echo.
//
// Worked example, the host side (session 0x0A0B0C0D, tag bits 10, window
// 256, max TLP 4116, ISN 0x11223344, 64 PH, 32 NPH, CplH and CplD infinite,
// 1024 PD, 64 NPD) greeting a GPU side whose session it does not know yet:
//
//	01 01 01 0a  0a 0b 0c 0d  00 00 00 00  01 00 10 14
//	11 22 33 44  00 40 00 20  00 00 30 00  00 00 04 00
//	00 00 00 40  00 00 00 00

// ControlType is byte 0 of a control message.
type ControlType uint8

// Control message types.
const (
	CtlHello        ControlType = 1
	CtlHelloAck     ControlType = 2
	CtlKeepalive    ControlType = 3
	CtlKeepaliveAck ControlType = 4
	CtlReset        ControlType = 5
)

func (t ControlType) String() string {
	switch t {
	case CtlHello:
		return "HELLO"
	case CtlHelloAck:
		return "HELLO-ACK"
	case CtlKeepalive:
		return "KEEPALIVE"
	case CtlKeepaliveAck:
		return "KEEPALIVE-ACK"
	case CtlReset:
		return "RESET"
	}
	return fmt.Sprintf("ControlType(%d)", uint8(t))
}

// ControlVersion is the control message version this package writes.
const ControlVersion = 1

// Sizes of control messages.
const (
	ControlLen = 12 // KEEPALIVE, KEEPALIVE-ACK, RESET
	HelloLen   = 40 // HELLO, HELLO-ACK
)

// Role is the side of a pair a bridge sits on.
type Role uint8

// Roles.
const (
	RoleHost Role = 1
	RoleGPU  Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleHost:
		return "host"
	case RoleGPU:
		return "gpu"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads a role by the name String gives it ("host", "gpu").
func ParseRole(s string) (Role, bool) {
	switch s {
	case "host":
		return RoleHost, true
	case "gpu":
		return RoleGPU, true
	}
	return 0, false
}

// Reset reasons (byte 3 of RESET).
const (
	ResetAdmin          uint8 = 1
	ResetUnknownSession uint8 = 2
	ResetProtocol       uint8 = 3
	ResetLinkDown       uint8 = 4
)

// Control is a decoded control message. Fields that a type does not carry
// are zero.
type Control struct {
	Type        ControlType
	Role        Role
	TagBits     uint8 // HELLO, HELLO-ACK
	Reason      uint8 // RESET
	Probe       uint8 // KEEPALIVE, KEEPALIVE-ACK
	Session     uint32
	PeerSession uint32
	Window      uint16
	MaxTLP      uint16
	ISN         uint32
	// Credits are the initial credits, indexed by CreditType; Infinite has
	// bit t set when type t is infinite.
	Credits  [NumCreditTypes]uint32
	Infinite uint8
}

// ErrControl is wrapped by every control decoding error.
var ErrControl = errors.New("encap: bad control message")

// Len returns the encoded size of c.
func (c *Control) Len() int {
	if c.Type == CtlHello || c.Type == CtlHelloAck {
		return HelloLen
	}
	return ControlLen
}

// AppendTo appends the encoding of c to b.
func (c *Control) AppendTo(b []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, c.Len())...)
	c.put(b[n:])
	return b
}

// Put writes c into b, which must be at least c.Len() bytes, and returns
// the number of bytes written.
func (c *Control) Put(b []byte) (int, error) {
	if len(b) < c.Len() {
		return 0, fmt.Errorf("%w: buffer of %d bytes, %s needs %d", ErrControl, len(b), c.Type, c.Len())
	}
	c.put(b)
	return c.Len(), nil
}

func (c *Control) put(b []byte) {
	clear(b[:c.Len()])
	b[0] = byte(c.Type)
	b[1] = ControlVersion
	b[2] = byte(c.Role)
	switch c.Type {
	case CtlHello, CtlHelloAck:
		b[3] = c.TagBits
	case CtlReset:
		b[3] = c.Reason
	case CtlKeepalive, CtlKeepaliveAck:
		b[3] = c.Probe
	}
	binary.BigEndian.PutUint32(b[4:], c.Session)
	binary.BigEndian.PutUint32(b[8:], c.PeerSession)
	if c.Type != CtlHello && c.Type != CtlHelloAck {
		return
	}
	binary.BigEndian.PutUint16(b[12:], c.Window)
	binary.BigEndian.PutUint16(b[14:], c.MaxTLP)
	binary.BigEndian.PutUint32(b[16:], c.ISN)
	binary.BigEndian.PutUint16(b[20:], uint16(c.Credits[CreditPH]))
	binary.BigEndian.PutUint16(b[22:], uint16(c.Credits[CreditNPH]))
	binary.BigEndian.PutUint16(b[24:], uint16(c.Credits[CreditCplH]))
	b[26] = c.Infinite & 0x3f
	binary.BigEndian.PutUint32(b[28:], c.Credits[CreditPD])
	binary.BigEndian.PutUint32(b[32:], c.Credits[CreditNPD])
	binary.BigEndian.PutUint32(b[36:], c.Credits[CreditCplD])
}

// ParseControl decodes a control message from the body of a CONTROL frame.
// Bytes after the message are ignored (padding).
func ParseControl(b []byte) (Control, error) {
	var c Control
	if len(b) < ControlLen {
		return c, fmt.Errorf("%w: %d bytes, need at least %d", ErrControl, len(b), ControlLen)
	}
	c.Type = ControlType(b[0])
	if c.Type < CtlHello || c.Type > CtlReset {
		return c, fmt.Errorf("%w: byte 0: unknown control type %d", ErrControl, b[0])
	}
	if b[1] != ControlVersion {
		return c, fmt.Errorf("%w: byte 1: control version %d, want %d", ErrControl, b[1], ControlVersion)
	}
	c.Role = Role(b[2])
	if c.Role != RoleHost && c.Role != RoleGPU {
		return c, fmt.Errorf("%w: byte 2: role %d, want 1 (host) or 2 (gpu)", ErrControl, b[2])
	}
	c.Session = binary.BigEndian.Uint32(b[4:])
	c.PeerSession = binary.BigEndian.Uint32(b[8:])
	if c.Session == 0 {
		return c, fmt.Errorf("%w: bytes 4-7: session is 0", ErrControl)
	}
	switch c.Type {
	case CtlReset:
		c.Reason = b[3]
		return c, nil
	case CtlKeepalive, CtlKeepaliveAck:
		c.Probe = b[3]
		return c, nil
	}
	if len(b) < HelloLen {
		return c, fmt.Errorf("%w: %s of %d bytes, need %d", ErrControl, c.Type, len(b), HelloLen)
	}
	c.TagBits = b[3]
	if c.TagBits != 8 && c.TagBits != 10 {
		return c, fmt.Errorf("%w: byte 3: tag bits %d, want 8 or 10", ErrControl, b[3])
	}
	c.Window = binary.BigEndian.Uint16(b[12:])
	if c.Window == 0 {
		return c, fmt.Errorf("%w: bytes 12-13: window is 0", ErrControl)
	}
	c.MaxTLP = binary.BigEndian.Uint16(b[14:])
	if c.MaxTLP < 16 {
		return c, fmt.Errorf("%w: bytes 14-15: max TLP %d below a 4-DW header", ErrControl, c.MaxTLP)
	}
	c.ISN = binary.BigEndian.Uint32(b[16:])
	c.Credits[CreditPH] = uint32(binary.BigEndian.Uint16(b[20:]))
	c.Credits[CreditNPH] = uint32(binary.BigEndian.Uint16(b[22:]))
	c.Credits[CreditCplH] = uint32(binary.BigEndian.Uint16(b[24:]))
	c.Infinite = b[26]
	if c.Infinite&^0x3f != 0 {
		return c, fmt.Errorf("%w: byte 26: infinite mask %#x has bits above 5", ErrControl, b[26])
	}
	c.Credits[CreditPD] = binary.BigEndian.Uint32(b[28:])
	c.Credits[CreditNPD] = binary.BigEndian.Uint32(b[32:])
	c.Credits[CreditCplD] = binary.BigEndian.Uint32(b[36:])
	return c, nil
}
