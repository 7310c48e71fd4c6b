package pcapio

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// MaxSnaplen is the largest record this package reads (tcpdump's
// MAXIMUM_SNAPLEN). Files that declare a larger or zero snap length are read
// with this limit instead.
const MaxSnaplen = 262144

// Format is a capture file format.
type Format uint8

// Capture formats.
const (
	FormatPcap Format = iota + 1
	FormatPcapNG
)

// String returns "pcap" or "pcapng".
func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapNG:
		return "pcapng"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Sentinel errors.
var (
	// ErrFormat: the input is neither pcap nor pcapng.
	ErrFormat = errors.New("unknown capture format")
	// ErrCorrupt: a record or block of the capture is malformed.
	ErrCorrupt = errors.New("corrupt capture")
	// ErrLinkType: the capture holds frames of another link layer than
	// OpenEthernet wants.
	ErrLinkType = errors.New("unsupported link type")
	// ErrNotAFile: the path names a directory.
	ErrNotAFile = errors.New("a directory: a capture is a file (pcap or pcapng, gzip allowed)")
)

// Magic numbers as read little-endian from the first four bytes.
const (
	magicMicros    = 0xa1b2c3d4
	magicNanos     = 0xa1b23c4d
	magicMicrosBE  = 0xd4c3b2a1
	magicNanosBE   = 0x4d3cb2a1
	magicPcapNGSHB = 0x0a0d0d0a
)

// Reader reads frames from a pcap or pcapng capture.
type Reader struct {
	pcap *pcapgo.Reader
	// pcapIn counts what pcap read from the capture (pcapgo reads
	// ahead), and pcapEnd is where the last whole record ended: pcapgo
	// reports a record whose header is there and its data not at all as
	// a clean end (io.EOF), and at the end pcapIn has read everything.
	pcapIn  *countingReader
	pcapEnd int64
	ng      *pcapgo.NgReader
	ngSan   *ngSanitizer
	closer  io.Closer
	format  Format
	nanos   bool
	snaplen uint32
	records int // records returned so far
	err     error
}

// Open opens a capture file; the format is detected from its contents.
func Open(path string) (*Reader, error) {
	// A directory is refused by name, not as a file of 0 bytes. A pipe
	// is read as a stream.
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotAFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// OpenEthernet is Open for captures of Ethernet frames, the only ones that
// carry TLPs (NetTLP, dxpu): others fail with ErrLinkType, naming the file
// and its link type.
func OpenEthernet(path string) (*Reader, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	if lt := r.LinkType(); lt != layers.LinkTypeEthernet {
		r.Close()
		return nil, fmt.Errorf("%s: %w %v (%d): only Ethernet captures hold TLP frames", path, ErrLinkType, lt, uint16(lt))
	}
	return r, nil
}

// NewReader reads a capture from r, detecting pcap (µs or ns magic, either
// byte order), pcapng and gzip compression of either.
func NewReader(r io.Reader) (rd *Reader, err error) {
	defer recoverInto(&err, "file header")
	br := bufio.NewReader(r)
	head, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("pcapio: file header: %w: %d bytes, need at least 4", ErrFormat, len(head))
	}
	var src io.Reader = br
	if head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("pcapio: gzip header: %w", err)
		}
		br = bufio.NewReader(zr)
		src = br
		if head, err = br.Peek(4); err != nil {
			return nil, fmt.Errorf("pcapio: file header (inside gzip): %w: %d bytes", ErrFormat, len(head))
		}
	}
	rd = &Reader{}
	switch magic := binary.LittleEndian.Uint32(head); magic {
	case magicMicros, magicMicrosBE, magicNanos, magicNanosBE:
		rd.format = FormatPcap
		rd.nanos = magic == magicNanos || magic == magicNanosBE
		rd.pcapIn = &countingReader{r: src}
		p, err := pcapgo.NewReader(rd.pcapIn)
		if err != nil {
			return nil, fmt.Errorf("pcapio: pcap file header: %w: %v", ErrCorrupt, err)
		}
		rd.pcapEnd = pcapFileHeaderLen
		rd.snaplen = p.Snaplen()
		// pcapgo allocates up to the snap length per record before reading
		// it; cap that, and accept records longer than a too-small declared
		// snap length as tcpdump and Wireshark do.
		p.SetSnaplen(MaxSnaplen)
		rd.pcap = p
	case magicPcapNGSHB:
		rd.format = FormatPcapNG
		rd.ngSan = &ngSanitizer{r: src}
		ng, err := pcapgo.NewNgReader(rd.ngSan, pcapgo.NgReaderOptions{SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("pcapio: pcapng header: %w", rd.wrapNg(err))
		}
		rd.ng = ng
		rd.snaplen = rd.ngSan.firstSnap
		if ng.NInterfaces() > 0 {
			if ifc, err := ng.Interface(0); err == nil {
				rd.nanos = ifc.TimestampResolution.Exponent() > 6 || ifc.TimestampResolution.Binary()
			}
		}
	default:
		return nil, fmt.Errorf("pcapio: file header: %w: magic %02x %02x %02x %02x", ErrFormat, head[0], head[1], head[2], head[3])
	}
	return rd, nil
}

// wrapNg prefers the sanitizer's precise error over pcapgo's.
func (r *Reader) wrapNg(err error) error {
	if r.ngSan != nil && r.ngSan.err != nil && !errors.Is(r.ngSan.err, io.EOF) {
		return r.ngSan.err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
}

// Next returns the next frame and its capture information. The data is
// freshly allocated and belongs to the caller. At the end of the capture it
// returns io.EOF; a capture cut in the middle of a record returns an error
// wrapping io.ErrUnexpectedEOF. After an error, Next keeps returning it.
func (r *Reader) Next() (data []byte, ci gopacket.CaptureInfo, err error) {
	data, ci, err = r.ZeroCopyReadPacketData()
	if err != nil {
		return nil, ci, err
	}
	return append([]byte(nil), data...), ci, nil
}

// ReadPacketData is Next, for use as a gopacket.PacketDataSource.
func (r *Reader) ReadPacketData() ([]byte, gopacket.CaptureInfo, error) { return r.Next() }

// ZeroCopyReadPacketData is Next without the copy: data is valid until the
// following call. It implements gopacket.ZeroCopyPacketDataSource.
func (r *Reader) ZeroCopyReadPacketData() (data []byte, ci gopacket.CaptureInfo, err error) {
	if r.err != nil {
		return nil, ci, r.err
	}
	defer func() {
		if err != nil {
			r.err = err
		}
	}()
	defer recoverRecord(&err, r.records+1)
	switch {
	case r.pcap != nil:
		data, ci, err = r.pcap.ZeroCopyReadPacketData()
		if err == io.EOF && r.pcapIn.n > r.pcapEnd {
			err = fmt.Errorf("%w: %d bytes after the last whole record: a record cut before its data", io.ErrUnexpectedEOF, r.pcapIn.n-r.pcapEnd)
		}
		if err == nil {
			r.pcapEnd += pcapRecordHeaderLen + int64(ci.CaptureLength)
		}
	case r.ng != nil:
		data, ci, err = r.ng.ZeroCopyReadPacketData()
		if err != nil {
			err = r.wrapNg(err)
		}
	default:
		return nil, ci, errors.New("pcapio: reader not opened")
	}
	if err != nil {
		if err == io.EOF {
			return nil, ci, io.EOF
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil, ci, fmt.Errorf("pcapio: record %d: %w", r.records+1, err)
	}
	if ci.Length == 0 {
		// No frame is empty on the wire: this is a zero-filled stretch (a
		// preallocated or half-written file, a gzip of zeros), which would
		// otherwise read as millions of empty records.
		return nil, ci, fmt.Errorf("pcapio: record %d: %w: original length 0 (zero-filled data, not a record)", r.records+1, ErrCorrupt)
	}
	if len(data) != ci.CaptureLength || ci.CaptureLength > ci.Length && r.format == FormatPcapNG {
		return nil, ci, fmt.Errorf("pcapio: record %d: %w: captured length %d, original length %d", r.records+1, ErrCorrupt, ci.CaptureLength, ci.Length)
	}
	r.records++
	return data, ci, nil
}

// LinkType returns the link type of the capture (of its first interface for
// pcapng).
func (r *Reader) LinkType() layers.LinkType {
	if r.pcap != nil {
		return r.pcap.LinkType()
	}
	if r.ng != nil {
		return r.ng.LinkType()
	}
	return 0
}

// Format returns the detected file format.
func (r *Reader) Format() Format { return r.format }

// Nanos reports whether timestamps have nanosecond (or finer) resolution.
func (r *Reader) Nanos() bool { return r.nanos }

// Snaplen returns the snap length the file declares (0: unlimited).
func (r *Reader) Snaplen() uint32 { return r.snaplen }

// Close closes the file opened by Open; a no-op for NewReader.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c.Close()
}

// recoverInto turns a panic in pcapgo into an error: malformed files must
// never crash the caller.
func recoverInto(err *error, where string) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("pcapio: %s: %w: decoder panic: %v", where, ErrCorrupt, p)
	}
}

// recoverRecord is recoverInto for record n (formatted only on a panic, so
// that the read path does not allocate).
func recoverRecord(err *error, n int) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("pcapio: record %d: %w: decoder panic: %v", n, ErrCorrupt, p)
	}
}

// Sizes of a classic pcap file's header and of a record's header.
const (
	pcapFileHeaderLen   = 24
	pcapRecordHeaderLen = 16
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
