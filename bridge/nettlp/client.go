package nettlp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"time"

	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// LibtlpTimeout is how long libtlp waits for each completion.
const LibtlpTimeout = 500 * time.Millisecond

// Client is a Go twin of NetTLP's libtlp DMA client, on the wire byte for
// byte: one socket per tag bound to local:0x3000+(tag&0xf) and connected to
// the same port at the target; requests built as libtlp builds them (zeros
// in the NetTLP header; 3DW below 0xffffffff, 4DW from there; the address
// rounded down to a DW; libtlp's byte enables and Length, 1024 spilling
// into the AT bits; a single-DW write that ends before the DW's last byte
// padded libtlp's way); one request outstanding; completions taken by
// port alone (tag, requester and completer IDs ignored), reassembled with
// libtlp's own arithmetic and last-completion test, waiting 500 ms for
// each. It exists to prove a target works with libtlp unchanged; where
// libtlp would loop forever or overrun its buffer, Client returns an error.
type Client struct {
	conn      *net.UDPConn
	tag       uint8
	requester tlp.ID
	// Timeout per completion; LibtlpTimeout by default.
	Timeout time.Duration
	out     []byte
	in      []byte
	rx      clientRecv
}

// Dial opens a client socket for tag on local and connects it to remote,
// as libtlp's nettlp_init does.
func Dial(local, remote netip.Addr, tag uint8, requester tlp.ID) (*Client, error) {
	port := Port(uint16(tag))
	c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, port)),
		net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, port)))
	if err != nil {
		return nil, fmt.Errorf("nettlp: client tag %d: %w", tag, err)
	}
	cl := &Client{conn: c, tag: tag, requester: requester, Timeout: LibtlpTimeout,
		out: make([]byte, MaxDatagram), in: make([]byte, MaxDatagram)}
	cl.rx.init(c)
	return cl, nil
}

// Close closes the socket.
func (c *Client) Close() error { return c.conn.Close() }

// LibtlpByteEnables returns the First and Last DW byte enables and the
// Length in DW that libtlp computes for count bytes at addr (its
// tlp_calculate_fstdw, _lstdw and _length). Length may exceed 1024 for
// requests libtlp cannot express.
func LibtlpByteEnables(addr uint64, count int) (first, last uint8, length int) {
	start := addr &^ 3
	end := addr + uint64(count)
	var endStart uint64
	if end&3 == 0 {
		endStart = end - 4
	} else {
		endStart = end &^ 3
	}
	if endStart <= start {
		endStart = addr + 4
	}
	if end >= endStart {
		last = uint8(^(0xf << (end - endStart)) & 0xf)
	}
	be := uint8(0xf)
	if count < 4 {
		be = uint8(^(0xf << count) & 0xf)
	}
	first = be << (addr & 3) & 0xf
	n := end - start
	length = int(n >> 2)
	if n&3 != 0 {
		length++
	}
	return first, last, length
}

// putLibtlpRequest writes a NetTLP header of zeros and libtlp's request
// header for count bytes at addr into b and returns their length.
func putLibtlpRequest(b []byte, write bool, addr uint64, count int, tag uint8, requester tlp.ID) int {
	first, last, length := LibtlpByteEnables(addr, count)
	clear(b[:HeaderLen+16])
	h := b[HeaderLen:]
	n := 12
	if addr < 0xffffffff {
		binary.BigEndian.PutUint32(h[8:], uint32(addr)&^3)
	} else {
		h[0] = 0x20
		n = 16
		binary.BigEndian.PutUint64(h[8:], addr&^3)
	}
	if write {
		h[0] |= 0x40
	}
	// tlp_set_length ORs the count into the 16-bit field: 1024 lands in AT.
	falen := uint16(length)
	h[2], h[3] = byte(falen>>8), byte(falen)
	binary.BigEndian.PutUint16(h[4:], uint16(requester))
	h[6] = tag
	h[7] = last<<4 | first
	return HeaderLen + n
}

// Read is libtlp's dma_read: one MRd for count = len(p) bytes at addr, then
// completions until the last. It returns the bytes libtlp would report;
// on a timeout it returns what arrived with ErrTimeout.
func (c *Client) Read(addr uint64, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, fmt.Errorf("%w: read of 0 bytes", ErrConfig)
	}
	n := putLibtlpRequest(c.out, false, addr, len(p), c.tag, c.requester)
	if _, err := c.conn.Write(c.out[:n]); err != nil {
		return 0, fmt.Errorf("nettlp: client send MRd: %w", err)
	}
	return c.readCplD(p)
}

// readCplD mirrors libtlp_read_cpld: the datagram is scattered as readv
// would (NetTLP header, 12-byte completion header, the caller's remaining
// buffer, 16 spare bytes) and moved around by Lower Address & 3 the way
// libtlp does.
func (c *Client) readCplD(p []byte) (int, error) {
	received := 0
	for {
		// The wait for each completion is Timeout, as libtlp's; one taken
		// already in a batch (clientRecv) waits for nothing.
		if !c.rx.pending() {
			if err := c.conn.SetReadDeadline(time.Now().Add(c.Timeout)); err != nil {
				return received, err
			}
		}
		d, err := c.rx.recv(c.conn, c.in)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return received, fmt.Errorf("%w: %d of %d bytes after %s", ErrTimeout, received, len(p), sim.FormatDuration(c.Timeout))
			}
			return received, err
		}
		r, done, err := libtlpStep(p, received, d)
		received = r
		if err != nil || done {
			return received, err
		}
	}
}

// libtlpStep applies one completion datagram d to the read buffer p, of
// which received bytes are done, exactly as libtlp_read_cpld does: the
// datagram is scattered as its readv would (NetTLP header, 12-byte
// completion header, p[received:], 16 spare bytes), moved by Lower
// Address & 3 the way libtlp moves it, and counted with libtlp's
// last-completion test. It returns the new received count and whether
// that completion was the last.
func libtlpStep(p []byte, received int, d []byte) (int, bool, error) {
	if len(d) < HeaderLen+cplHeaderLen {
		return received, false, fmt.Errorf("%w: datagram of %d bytes", ErrBadCompletion, len(d))
	}
	h := d[HeaderLen:]
	if h[0]&0x1f != 0x0a || h[0]&0x40 == 0 {
		if h[0] == 0x0a {
			return received, false, fmt.Errorf("%w: Cpl without data, status %v (libtlp: EBADMSG)", ErrBadCompletion, tlp.Status(h[6]>>5))
		}
		return received, false, fmt.Errorf("%w: Fmt/Type %#02x is not CplD (libtlp: EBADMSG)", ErrBadCompletion, h[0])
	}
	if st := tlp.Status(h[6] >> 5); st != tlp.StatusSC {
		return received, false, fmt.Errorf("%w: status %v", ErrBadCompletion, st)
	}
	length := int(binary.BigEndian.Uint16(h[2:]) & 0x3ff)
	bcnt := int(binary.BigEndian.Uint16(h[6:]) & 0xfff)
	a := int(h[11] & 3)
	win := p[received:]
	payload := d[HeaderLen+cplHeaderLen:]
	k := copy(win, payload)
	var rest [16]byte
	copy(rest[:], payload[k:])
	if a != 0 {
		if diff := len(win) - a; diff > 0 {
			copy(win[:diff], win[a:])
			copy(win[diff:], rest[:a])
		} else {
			diff = a - len(win)
			if bcnt > len(win) || diff+bcnt > len(rest) {
				return received, false, fmt.Errorf("%w: libtlp would move %d bytes into a %d-byte window", ErrBadCompletion, bcnt, len(win))
			}
			copy(win[:bcnt], rest[diff:diff+bcnt])
		}
	}
	if length == (a+bcnt+3)>>2 {
		received += bcnt
		if received > len(p) {
			return len(p), true, fmt.Errorf("%w: libtlp would count %d bytes for a %d-byte read", ErrBadCompletion, received, len(p))
		}
		return received, true, nil
	}
	received += length << 2
	if received > len(p) {
		return len(p), false, fmt.Errorf("%w: libtlp would count %d bytes for a %d-byte read and overrun its buffer", ErrBadCompletion, received, len(p))
	}
	return received, false, nil
}

// Write is libtlp's dma_write: one MWr of len(p) bytes at addr, never
// acknowledged. It returns len(p).
func (c *Client) Write(addr uint64, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, fmt.Errorf("%w: write of 0 bytes", ErrConfig)
	}
	b := appendLibtlpWrite(c.out[:0], addr, p, c.tag, c.requester)
	if len(b) > MaxDatagram {
		return 0, fmt.Errorf("nettlp: client write of %d bytes does not fit a datagram", len(p))
	}
	if _, err := c.conn.Write(b); err != nil {
		return 0, fmt.Errorf("nettlp: client send MWr: %w", err)
	}
	return len(p), nil
}

// appendLibtlpWrite appends the datagram libtlp's dma_write sends for p at
// addr. libtlp pads the front with one zero per clear bit among bits 0..2
// of the First BE, and the back with one per clear bit among bits 3..1 of
// the Last BE: right for every BE but a single DW that ends before its last
// byte, which goes out with three payload bytes, data right-aligned.
func appendLibtlpWrite(dst []byte, addr uint64, p []byte, tag uint8, requester tlp.ID) []byte {
	first, last, _ := LibtlpByteEnables(addr, len(p))
	var hdr [HeaderLen + 16]byte
	n := putLibtlpRequest(hdr[:], true, addr, len(p), tag, requester)
	dst = append(dst, hdr[:n]...)
	var pad [3]byte
	if first != 0 && first != 0xf {
		dst = append(dst, pad[:3-bits.OnesCount8(first&7)]...)
	}
	dst = append(dst, p...)
	if last != 0 && last != 0xf {
		dst = append(dst, pad[:3-bits.OnesCount8(last&0xe)]...)
	}
	return dst
}

// ReadAligned is libtlp's dma_read_aligned: dma_read pieces of at most mrrs
// bytes from addr onwards (libtlp cuts only by MRRS, so a piece may cross
// 4 KiB). It returns the total read; where libtlp would retry a piece that
// returned nothing forever, it stops with the error.
func (c *Client) ReadAligned(addr uint64, p []byte, mrrs int) (int, error) {
	if mrrs <= 0 {
		return 0, fmt.Errorf("%w: MRRS %d", ErrConfig, mrrs)
	}
	done := 0
	for done < len(p) {
		l := min(len(p)-done, mrrs)
		n, err := c.Read(addr+uint64(done), p[done:done+l])
		done += n
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, fmt.Errorf("%w: a read returned 0 bytes; libtlp would retry forever", ErrBadCompletion)
		}
	}
	return done, nil
}

// WriteAligned is libtlp's dma_write_aligned: MWr pieces of at most mps
// bytes cut from addr onwards.
func (c *Client) WriteAligned(addr uint64, p []byte, mps int) (int, error) {
	if mps <= 0 {
		return 0, fmt.Errorf("%w: MPS %d", ErrConfig, mps)
	}
	done := 0
	for done < len(p) {
		l := min(len(p)-done, mps)
		n, err := c.Write(addr+uint64(done), p[done:done+l])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
