package nettlpside

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/dxpu/dxpu/tlp"
)

// Doorbell is the test target of docs/protocol.md (section 12.1): a
// command block at Addr in the local side's memory. A write of a whole
// command (DoorbellCmdLen bytes at Addr) makes the local side issue
// requests toward the peer; the completions of its reads are recorded in
// a status block at Addr+DoorbellStatusOff that the peer reads back. A
// conformance kit uses it to make an implementation outside its process
// issue requests, and judges tags, ordering, completion timeouts and
// link-down behaviour from the wire and the status. Sans-I/O: Take looks at
// every TLP delivered to the local side and returns the requests to issue;
// the caller hands them to its bridge in order, waiting while it refuses
// (never dropping one). Safe for concurrent use.
type Doorbell struct {
	addr  uint64
	id    tlp.ID
	write func(addr uint64, b []byte) // into the memory the status lives in

	mu     sync.Mutex
	number uint32
	count  int
	issued uint32
	done   uint32
	status [DoorbellMaxCount]byte
	addrs  [DoorbellMaxCount]uint64 // of the command's reads, to check their data
}

// Layout of the test target (docs/protocol.md, section 12.1).
const (
	DoorbellCmdLen    = 32  // command: op, count, bytes, number, address, stride
	DoorbellStatusOff = 64  // status block, from Addr
	DoorbellStatusLen = 80  // number, issued, completed, reserved, 64 statuses
	DoorbellMaxCount  = 64  // requests per command
	DoorbellMaxBytes  = 256 // bytes per request
	DoorbellPending   = 0xff
	// DoorbellWrongData is the status of a read whose completion carried
	// other data than the peer's memory pattern (DoorbellReadData) at its
	// address: a completion matched to the wrong request.
	DoorbellWrongData = 0xfe

	DoorbellOpWrite = 1
	DoorbellOpRead  = 2
)

// DoorbellCommand is one command of the test target.
type DoorbellCommand struct {
	Op     uint8
	Count  int    // 1..DoorbellMaxCount
	Bytes  int    // per request, a multiple of 4 in 4..DoorbellMaxBytes
	Number uint32 // non-zero; echoed in the status
	Addr   uint64 // of the first request, in the peer's memory
	Stride uint64
}

// AppendTo appends the command's 32 bytes.
func (c DoorbellCommand) AppendTo(b []byte) []byte {
	b = append(b, c.Op, byte(c.Count))
	b = binary.BigEndian.AppendUint16(b, uint16(c.Bytes))
	b = binary.BigEndian.AppendUint32(b, c.Number)
	b = binary.BigEndian.AppendUint64(b, c.Addr)
	b = binary.BigEndian.AppendUint64(b, c.Stride)
	return append(b, make([]byte, 8)...)
}

// ParseDoorbellCommand parses and checks a command.
func ParseDoorbellCommand(b []byte) (DoorbellCommand, error) {
	if len(b) != DoorbellCmdLen {
		return DoorbellCommand{}, fmt.Errorf("doorbell: command of %d bytes, want %d", len(b), DoorbellCmdLen)
	}
	c := DoorbellCommand{Op: b[0], Count: int(b[1]), Bytes: int(binary.BigEndian.Uint16(b[2:])),
		Number: binary.BigEndian.Uint32(b[4:]), Addr: binary.BigEndian.Uint64(b[8:]), Stride: binary.BigEndian.Uint64(b[16:])}
	switch {
	case c.Op != DoorbellOpWrite && c.Op != DoorbellOpRead:
		return c, fmt.Errorf("doorbell: byte 0: op %d, want 1 (write) or 2 (read)", c.Op)
	case c.Count < 1 || c.Count > DoorbellMaxCount:
		return c, fmt.Errorf("doorbell: byte 1: count %d, want 1..%d", c.Count, DoorbellMaxCount)
	case c.Bytes < 4 || c.Bytes > DoorbellMaxBytes || c.Bytes%4 != 0:
		return c, fmt.Errorf("doorbell: bytes 2-3: %d bytes per request, want a multiple of 4 in 4..%d", c.Bytes, DoorbellMaxBytes)
	case c.Number == 0:
		return c, fmt.Errorf("doorbell: bytes 4-7: command number 0")
	case c.Addr%4 != 0 || c.Stride%4 != 0:
		return c, fmt.Errorf("doorbell: address %#x or stride %#x not DW-aligned", c.Addr, c.Stride)
	}
	return c, nil
}

// DoorbellData is byte j of write i of command number n: what the peer
// checks its writes against.
func DoorbellData(n uint32, i, j int) byte { return byte(int(n) + 7*i + j) }

// DoorbellReadData is the byte the peer's memory holds at addr, which it
// returns to the test target's reads: the target checks the data of each
// read against it.
func DoorbellReadData(addr uint64) byte { return byte(addr) ^ byte(addr>>8) ^ 0x5a }

// NewDoorbell returns the test target at addr for a local side with
// routing ID id (the requester of its requests); write stores the status
// block into the local side's memory.
func NewDoorbell(addr uint64, id tlp.ID, write func(addr uint64, b []byte)) *Doorbell {
	d := &Doorbell{addr: addr, id: id, write: write}
	for i := range d.status {
		d.status[i] = DoorbellPending
	}
	return d
}

// Take looks at a TLP delivered to the local side. A command written to
// the doorbell returns the requests to issue, in order; a completion of
// one of the doorbell's reads is recorded (consumed: the memory behind the
// doorbell has nothing to do with it). A bad command is ignored.
func (d *Doorbell) Take(v tlp.View) (issue [][]byte, consumed bool) {
	k := v.Kind()
	switch {
	case k == tlp.MWr && v.Address() == d.addr && v.PayloadLen() == DoorbellCmdLen:
		c, err := ParseDoorbellCommand(v.Payload())
		if err != nil {
			return nil, false
		}
		return d.start(c), false
	case k.IsCompletion() && v.RequesterID() == d.id:
		d.complete(v)
		return nil, true
	}
	return nil, false
}

func (d *Doorbell) start(c DoorbellCommand) [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.number, d.count, d.issued, d.done = c.Number, c.Count, 0, 0
	for i := range d.status {
		d.status[i] = DoorbellPending
	}
	var out [][]byte
	for i := 0; i < c.Count; i++ {
		p := tlp.Packet{RequesterID: d.id, Tag: uint16(i), FirstBE: 0xf, Address: c.Addr + uint64(i)*c.Stride}
		if c.Bytes > 4 {
			p.LastBE = 0xf
		}
		if c.Op == DoorbellOpWrite {
			p.Kind = tlp.MWr
			p.Data = make([]byte, c.Bytes)
			for j := range p.Data {
				p.Data[j] = DoorbellData(c.Number, i, j)
			}
		} else {
			p.Kind, p.Length = tlp.MRd, uint16(c.Bytes/4)
			d.addrs[i] = p.Address
		}
		b, err := p.AppendTo(nil)
		if err != nil {
			continue // a request crossing 4 KiB: the command's fault, skipped
		}
		out = append(out, b)
	}
	d.issued = uint32(len(out))
	d.store()
	return out
}

// complete records a read's final completion: the status of its first
// completion that ends it (a non-SC status, or the last byte).
func (d *Doorbell) complete(v tlp.View) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := int(v.Tag())
	if t >= d.count || d.status[t] != DoorbellPending {
		d.done++ // late or stray: counted, status kept
		d.store()
		return
	}
	last := v.Status() != tlp.StatusSC || !v.HasData() || v.PayloadLen()-int(v.LowerAddress()&3) >= v.ByteCount()
	if !last {
		return
	}
	d.status[t] = byte(v.Status())
	if v.Status() == tlp.StatusSC && v.HasData() && v.PayloadLen() >= v.ByteCount() {
		// One completion for the whole read: its data must be the peer's
		// memory at the read's address.
		for j, b := range v.Payload()[:v.ByteCount()] {
			if b != DoorbellReadData(d.addrs[t]+uint64(j)) {
				d.status[t] = DoorbellWrongData
				break
			}
		}
	}
	d.done++
	d.store()
}

// store writes the status block (mu held).
func (d *Doorbell) store() {
	if d.write == nil {
		return
	}
	b := make([]byte, 16, DoorbellStatusLen)
	binary.BigEndian.PutUint32(b[0:], d.number)
	binary.BigEndian.PutUint32(b[4:], d.issued)
	binary.BigEndian.PutUint32(b[8:], d.done)
	b = append(b, d.status[:]...)
	d.write(d.addr+DoorbellStatusOff, b)
}

// DoorbellStatus is the status block as the peer reads it back.
type DoorbellStatus struct {
	Number, Issued, Completed uint32
	Status                    [DoorbellMaxCount]byte // per read: DoorbellPending or its completion status
}

// ParseDoorbellStatus parses DoorbellStatusLen bytes of status.
func ParseDoorbellStatus(b []byte) (DoorbellStatus, error) {
	var s DoorbellStatus
	if len(b) < DoorbellStatusLen {
		return s, fmt.Errorf("doorbell: status of %d bytes, want %d", len(b), DoorbellStatusLen)
	}
	s.Number, s.Issued, s.Completed = binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])
	copy(s.Status[:], b[16:])
	return s, nil
}
