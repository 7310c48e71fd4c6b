package pcapio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// WriterOptions selects the output format.
type WriterOptions struct {
	PcapNG   bool            // pcapng instead of classic pcap
	Nanos    bool            // nanosecond timestamps (pcap: ns magic; pcapng: keep ns, else truncate to µs)
	Snaplen  uint32          // 0 = MaxSnaplen
	LinkType layers.LinkType // 0 = Ethernet
}

// Writer writes frames to a pcap or pcapng capture. Output is a pure
// function of the frames and options (no host names or clocks), so
// generated captures regenerate byte for byte.
type Writer struct {
	opt    WriterOptions
	bw     *bufio.Writer
	pcap   *pcapgo.Writer
	ng     *pcapgo.NgWriter
	closer io.Closer
}

// Create creates (truncates) path and returns a Writer on it.
func Create(path string, opt WriterOptions) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer = f
	return w, nil
}

// NewWriter writes the file header to w and returns a Writer.
func NewWriter(w io.Writer, opt WriterOptions) (*Writer, error) {
	if opt.Snaplen == 0 {
		opt.Snaplen = MaxSnaplen
	}
	if opt.LinkType == 0 {
		opt.LinkType = layers.LinkTypeEthernet
	}
	wr := &Writer{opt: opt, bw: bufio.NewWriter(w)}
	if opt.PcapNG {
		intf := pcapgo.NgInterface{Name: "dxpu", LinkType: opt.LinkType, SnapLength: opt.Snaplen}
		ng, err := pcapgo.NewNgWriterInterface(wr.bw, intf, pcapgo.NgWriterOptions{
			SectionInfo: pcapgo.NgSectionInfo{Application: "dxpu"},
		})
		if err != nil {
			return nil, fmt.Errorf("pcapio: pcapng header: %w", err)
		}
		wr.ng = ng
		return wr, nil
	}
	if opt.Nanos {
		wr.pcap = pcapgo.NewWriterNanos(wr.bw)
	} else {
		wr.pcap = pcapgo.NewWriter(wr.bw)
	}
	if err := wr.pcap.WriteFileHeader(opt.Snaplen, opt.LinkType); err != nil {
		return nil, fmt.Errorf("pcapio: pcap header: %w", err)
	}
	return wr, nil
}

// WritePacket writes one frame. ci.CaptureLength must be len(data); a zero
// ci.Length is taken as len(data), and an empty frame is refused. Frames longer than the snap length are
// cut to it, with Length kept.
func (w *Writer) WritePacket(ci gopacket.CaptureInfo, data []byte) error {
	if ci.Length == 0 {
		ci.Length = len(data)
	}
	if ci.Length == 0 {
		return errors.New("pcapio: empty frame (the reader refuses records of original length 0)")
	}
	if len(data) > int(w.opt.Snaplen) {
		data = data[:w.opt.Snaplen]
	}
	ci.CaptureLength = len(data)
	if ci.Length < ci.CaptureLength {
		return fmt.Errorf("pcapio: original length %d shorter than the %d bytes written", ci.Length, ci.CaptureLength)
	}
	ci.InterfaceIndex = 0
	ci.AncillaryData = nil
	if w.ng != nil {
		if !w.opt.Nanos {
			ci.Timestamp = ci.Timestamp.Truncate(time.Microsecond)
		}
		return w.ng.WritePacket(ci, data)
	}
	return w.pcap.WritePacket(ci, data)
}

// Write is WritePacket with the arguments in data-first order.
func (w *Writer) Write(data []byte, ci gopacket.CaptureInfo) error { return w.WritePacket(ci, data) }

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error {
	if w.ng != nil {
		if err := w.ng.Flush(); err != nil {
			return err
		}
	}
	return w.bw.Flush()
}

// Close flushes, and closes the file opened by Create.
func (w *Writer) Close() error {
	err := w.Flush()
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil {
			err = cerr
		}
		w.closer = nil
	}
	return err
}
