package nettlp

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/dxpu/dxpu/tlp"
)

// CompleterConfig shapes the completions a Completer sends.
type CompleterConfig struct {
	// MPS is the Max Payload Size in bytes (128..4096, a power of two):
	// no CplD carries more. Default 256, what the root complexes in the
	// NetTLP captures use.
	MPS int
	// RCB is the Read Completion Boundary in bytes (64 or 128; at most
	// MPS): a read split into several CplDs is cut on multiples of it.
	// Default 64.
	RCB int
	// CompleterID goes into every completion; default 00:00.0, a root
	// complex's ID.
	CompleterID tlp.ID
}

// MPSChoices lists the Max Payload Sizes PCIe defines, for messages.
const MPSChoices = "128, 256, 512, 1024, 2048 or 4096"

// ValidMPS reports whether n is a Max Payload Size PCIe defines.
func ValidMPS(n int) bool { return n >= 128 && n <= 4096 && bits.OnesCount(uint(n)) == 1 }

func (c *CompleterConfig) fill() error {
	if c.MPS == 0 {
		c.MPS = 256
	}
	if c.RCB == 0 {
		c.RCB = 64
	}
	if !ValidMPS(c.MPS) {
		return fmt.Errorf("%w: MPS %d: want %s", ErrConfig, c.MPS, MPSChoices)
	}
	if (c.RCB != 64 && c.RCB != 128) || c.RCB > c.MPS {
		return fmt.Errorf("%w: RCB %d: want 64 or 128, at most MPS %d", ErrConfig, c.RCB, c.MPS)
	}
	return nil
}

// cplHeaderLen is the size of a completion header (always 3 DW).
const cplHeaderLen = 12

// Completer is the sans-I/O core of a NetTLP-compatible DMA target: it
// takes one TLP at a time and applies writes to, or answers reads from, a
// Memory. It is not safe for concurrent use; run one per receive goroutine
// over a shared Memory and Stats.
//
// Completion rules, chosen so that libtlp works unchanged:
//   - a read whose DW span fits in MPS gets a single CplD (libtlp cannot
//     reassemble an unaligned read split in several);
//   - a larger read is split on RCB multiples, each CplD at most MPS bytes
//     (tlp.CplSplitter does the arithmetic),
//     in increasing address order, each with the Byte Count still due and
//     the Lower Address of its first byte, so libtlp's last-completion test
//     ((LA & 3) + Byte Count fits Length) holds on the last one only;
//   - no CplD carries 1024 DW, even with MPS 4096: its Length field reads
//     0, and libtlp takes it as 0 bytes (and a Byte Count of 4096 as 0);
//     such a read is cut at 2048 bytes;
//   - reads outside the Memory get a Cpl with status UR, as do IO, config
//     and AtomicOp requests and memory reads with byte enables that name no
//     bytes.
type Completer struct {
	cfg      CompleterConfig
	mps      int // cfg.MPS, or less under LimitMPS
	mem      Memory
	stats    *Stats
	headroom int
	frame    []byte // headroom + completion header + MPS
	data     [4096]byte
	fix      [4]byte // a libtlp short write, rearranged
}

// NewCompleter returns a Completer serving mem. Each completion it emits is
// preceded by headroom bytes the caller owns (the NetTLP header, say).
// stats may be nil.
func NewCompleter(cfg CompleterConfig, mem Memory, headroom int, stats *Stats) (*Completer, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if mem == nil {
		return nil, fmt.Errorf("%w: nil Memory", ErrConfig)
	}
	if headroom < 0 {
		return nil, fmt.Errorf("%w: headroom %d", ErrConfig, headroom)
	}
	if stats == nil {
		stats = new(Stats)
	}
	return &Completer{cfg: cfg, mps: cfg.MPS, mem: mem, stats: stats, headroom: headroom,
		frame: make([]byte, headroom+cplHeaderLen+cfg.MPS)}, nil
}

// Config returns the configuration in use (defaults filled in).
func (c *Completer) Config() CompleterConfig { return c.cfg }

// LimitMPS caps the completions at the largest Max Payload Size that is at
// most n bytes and at most the configured MPS, as PCIe enumeration sets a
// device's MPS to what every link on its path takes (a bridge's peer
// announcing 512-byte payloads, say); never below 128, the smallest MPS.
// n <= 0 lifts the cap. It returns the MPS now in use.
func (c *Completer) LimitMPS(n int) int {
	c.mps = c.cfg.MPS
	if n > 0 && n < c.mps {
		c.mps = max(128, 1<<(bits.Len(uint(n))-1))
	}
	return c.mps
}

// MPS returns the Max Payload Size the completions use now.
func (c *Completer) MPS() int { return c.mps }

// Handle serves one TLP. emit is called once per completion, in order,
// with the completion preceded by the headroom; the slice is reused after
// emit returns. Handle returns an error wrapping ErrMalformedRequest or
// ErrUnsupported for a TLP it could not serve as asked (a non-posted one
// is still answered, with UR, when its header is whole), an error from
// emit, or nil.
func (c *Completer) Handle(b []byte, emit func(frame []byte) error) error {
	r, err := decodeRequest(b)
	if err != nil {
		c.stats.Malformed.Add(1)
		if r.kind.IsNonPosted() && len(b) >= r.v.HeaderLen() {
			if uerr := c.sendUR(&r, emit); uerr != nil {
				return uerr
			}
		}
		return err
	}
	switch r.kind {
	case tlp.MRd, tlp.MRdLk:
		return c.read(&r, emit)
	case tlp.MWr:
		return c.write(&r)
	}
	if r.kind.IsNonPosted() {
		if err := c.sendUR(&r, emit); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s answered with UR", ErrUnsupported, r.kind)
	}
	c.stats.Ignored.Add(1)
	return fmt.Errorf("%w: %s ignored", ErrUnsupported, r.kind)
}

func (c *Completer) write(r *request) error {
	data, err := r.writeData(&c.fix)
	if err != nil {
		c.stats.Malformed.Add(1)
		return err
	}
	if r.v.EP() {
		c.stats.WritesLost.Add(1)
		return fmt.Errorf("%w: poisoned MWr at %#x dropped", ErrMalformedRequest, r.dwAddr)
	}
	if r.lengthDW == 1 && r.firstBE == 0 {
		c.stats.Writes.Add(1) // a zero-length write: nothing to store
		return nil
	}
	// One WriteAt per TLP, so that a write not wholly backed changes
	// nothing. Byte enables with holes (legal in a single DW; taken
	// leniently elsewhere) are merged over memory's current bytes.
	lead := int(r.addr - r.dwAddr)
	src := data[lead : lead+r.count]
	if !contiguousEnables(r) {
		buf := c.data[:r.count]
		if err := c.mem.ReadAt(buf, r.addr); err != nil {
			c.stats.WritesLost.Add(1)
			return fmt.Errorf("MWr dropped: %w", err)
		}
		for i := range buf {
			if byteEnabled(r, lead+i) {
				buf[i] = src[i]
			}
		}
		src = buf
	}
	if err := c.mem.WriteAt(src, r.addr); err != nil {
		c.stats.WritesLost.Add(1)
		return fmt.Errorf("MWr dropped: %w", err)
	}
	c.stats.Writes.Add(1)
	c.stats.BytesWritten.Add(uint64(r.count))
	return nil
}

// byteEnabled reports whether byte i of the request's DW span is written.
func byteEnabled(r *request, i int) bool {
	switch {
	case i < 4:
		return r.firstBE&(1<<i) != 0
	case i >= 4*r.lengthDW-4:
		return r.lastBE&(1<<(i-(4*r.lengthDW-4))) != 0
	}
	return true
}

// contiguousEnables reports whether the enabled bytes form one run.
func contiguousEnables(r *request) bool {
	if r.lengthDW == 1 {
		be := r.firstBE >> bits.TrailingZeros8(r.firstBE)
		return be&(be+1) == 0
	}
	switch r.firstBE {
	case 0xf, 0xe, 0xc, 0x8:
	default:
		return false
	}
	switch r.lastBE {
	case 0xf, 0x7, 0x3, 0x1:
		return true
	}
	return false
}

func (c *Completer) read(r *request, emit func([]byte) error) error {
	span := 4 * r.lengthDW
	data := c.data[:span]
	lead := int(r.addr - r.dwAddr)
	zeroLen := r.lengthDW == 1 && r.firstBE == 0
	n := r.count
	if zeroLen {
		n = 0
	}
	clear(data[:lead])
	clear(data[lead+n:])
	if err := c.mem.ReadAt(data[lead:lead+n], r.addr); err != nil {
		if uerr := c.sendUR(r, emit); uerr != nil {
			return uerr
		}
		return fmt.Errorf("%s answered with UR: %w", r.kind, err)
	}
	mps := c.mps
	if mps == 4096 && span == 4096 {
		// A 1024-DW CplD has Length field 0, which libtlp reads as 0
		// bytes: cut the span in two.
		mps = 2048
	}
	sp, err := tlp.NewCplSplitter(r.dwAddr, r.lengthDW, r.firstBE, r.lastBE, mps, c.cfg.RCB)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedRequest, err)
	}
	// Count the read before its completions leave, so that whoever sees
	// the data also sees the counters.
	c.stats.Reads.Add(1)
	c.stats.BytesRead.Add(uint64(n))
	for {
		part, ok := sp.Next()
		if !ok {
			break
		}
		start := part.Address &^ 3
		size := 4 * part.Length
		off := int(start - r.dwAddr)
		f := c.frame[:c.headroom+cplHeaderLen+size]
		putCplHeader(f[c.headroom:], r, tlp.StatusSC, c.cfg.CompleterID, part.Length, part.ByteCount, part.LowerAddress, true)
		copy(f[c.headroom+cplHeaderLen:], data[off:off+size])
		if err := emit(f); err != nil {
			return err
		}
		c.stats.Completions.Add(1)
	}
	return nil
}

// sendUR answers a non-posted request with a Cpl (CplLk for MRdLk) of
// status UR. Memory reads carry their byte count and lower address; other
// requests Byte Count 4 (the operand size for AtomicOps) and Lower Address
// 0, as the specification asks.
func (c *Completer) sendUR(r *request, emit func([]byte) error) error {
	bc, la := 4, uint8(0)
	switch {
	case r.kind == tlp.MRd || r.kind == tlp.MRdLk:
		if r.lengthDW > 0 {
			bc, la = r.count, uint8(r.addr&0x7f)
		}
	case r.kind.IsAtomic():
		bc = 4 * int(r.v.LengthField())
		if r.kind == tlp.CAS {
			bc /= 2
		}
		if bc == 0 || bc > 16 {
			bc = 4
		}
	}
	f := c.frame[:c.headroom+cplHeaderLen]
	putCplHeader(f[c.headroom:], r, tlp.StatusUR, c.cfg.CompleterID, 0, bc, la, false)
	if err := emit(f); err != nil {
		return err
	}
	c.stats.UR.Add(1)
	c.stats.Completions.Add(1)
	return nil
}

// putCplHeader writes a completion header for request r: TC, attributes
// and the 10-bit tag copied from the request.
func putCplHeader(h []byte, r *request, st tlp.Status, completer tlp.ID, lengthDW, byteCount int, la uint8, data bool) {
	req := r.v
	h[0] = 0x0a // Cpl
	if data {
		h[0] = 0x4a
	}
	if r.kind == tlp.MRdLk {
		h[0]++ // CplLk / CplDLk
	}
	h[1] = req[1] & 0xfc                     // T9, TC, T8, IDO copied; LN and TH cleared
	h[2] = req[2]&0x30 | byte(lengthDW>>8)&3 // RO, NS; TD, EP, AT clear
	h[3] = byte(lengthDW)
	binary.BigEndian.PutUint16(h[4:], uint16(completer))
	h[6] = byte(st)<<5 | byte(byteCount>>8)&0x0f
	h[7] = byte(byteCount)
	binary.BigEndian.PutUint16(h[8:], uint16(req.RequesterID()))
	h[10] = req[6] // Tag[7:0]
	h[11] = la & 0x7f
}
