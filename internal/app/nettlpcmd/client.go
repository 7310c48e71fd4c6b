package nettlpcmd

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp"
)

// ClientOptions are the flags `dxpu nettlp read` and `write` share.
type ClientOptions struct {
	Remote, Local, Requester, Addr string
	Tag                            int
	Timeout                        time.Duration
	Stdout                         io.Writer
}

// ReadOptions are `dxpu nettlp read`'s: Size bytes, in requests of at
// most MRRS bytes (0: one dma_read).
type ReadOptions struct {
	ClientOptions
	Size, MRRS int
}

// WriteOptions are `dxpu nettlp write`'s: the data in Hex or as String
// text, in writes of at most MPS bytes (0: one dma_write).
type WriteOptions struct {
	ClientOptions
	Hex, String string
	MPS         int
}

// dial opens a libtlp-like client with the options.
func (o ClientOptions) dial() (*nettlp.Client, uint64, error) {
	remote, err := netip.ParseAddr(o.Remote)
	if err != nil {
		return nil, 0, apperr.Usage(fmt.Errorf("--remote %q: %w", o.Remote, err))
	}
	local, err := netip.ParseAddr(o.Local)
	if err != nil {
		return nil, 0, apperr.Usage(fmt.Errorf("--local %q: %w", o.Local, err))
	}
	req, err := tlp.ParseID(o.Requester)
	if err != nil {
		return nil, 0, apperr.Usage(fmt.Errorf("--requester: %w", err))
	}
	if o.Tag < 0 || o.Tag > 255 {
		return nil, 0, apperr.Usage(fmt.Errorf("--tag %d: want 0..255", o.Tag))
	}
	addr, err := parseAddress("addr", o.Addr)
	if err != nil {
		return nil, 0, apperr.Usage(err)
	}
	if o.Timeout <= 0 {
		return nil, 0, apperr.Usage(units.Errorf("--timeout %v: must be positive", o.Timeout))
	}
	c, err := nettlp.Dial(local, remote, uint8(o.Tag), req)
	if err != nil {
		return nil, 0, apperr.Usage(err)
	}
	c.Timeout = o.Timeout
	return c, addr, nil
}

// Read DMA-reads from the target and hex-dumps what came back. A read
// that failed, even part way, prints nothing on stdout: its error says how
// many bytes came before it.
func Read(o ReadOptions) error {
	if o.Size < 1 || o.Size > 1<<20 {
		return apperr.Usage(fmt.Errorf("--size %d: want 1..1048576", o.Size))
	}
	if err := checkSplit("mrrs", o.MRRS); err != nil {
		return err
	}
	if o.MRRS == 0 && o.Size > maxRequestBytes {
		return apperr.Usage(fmt.Errorf("--size %d in one dma_read: at most %d (use --mrrs)", o.Size, maxRequestBytes))
	}
	c, addr, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, o.Size)
	var n int
	if o.MRRS > 0 {
		n, err = c.ReadAligned(addr, buf, o.MRRS)
	} else {
		n, err = c.Read(addr, buf)
	}
	if err != nil {
		return apperr.Failed(fmt.Errorf("read at %#x: %d of %d bytes came: %w", addr, n, o.Size, err))
	}
	if n < o.Size {
		return apperr.Failed(fmt.Errorf("read at %#x: %d of %d bytes came, and the target's last completion said no more would", addr, n, o.Size))
	}
	fmt.Fprintf(o.Stdout, "read %d of %d bytes at %#x\n", n, o.Size, addr)
	fmt.Fprint(o.Stdout, hex.Dump(buf[:n]))
	return nil
}

// Write DMA-writes to the target (posted: nothing comes back).
func Write(o WriteOptions) error {
	data := []byte(o.String)
	if o.Hex != "" {
		if o.String != "" {
			return apperr.Usage(errors.New("give --hex or --string, not both"))
		}
		var err error
		if data, err = hex.DecodeString(strings.ReplaceAll(o.Hex, " ", "")); err != nil {
			return apperr.Usage(fmt.Errorf("--hex: %w", err))
		}
	}
	if len(data) == 0 || len(data) > 1<<20 {
		return apperr.Usage(fmt.Errorf("%d bytes to write: want 1..1048576 (--hex or --string)", len(data)))
	}
	if err := checkSplit("mps", o.MPS); err != nil {
		return err
	}
	c, addr, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var n int
	if o.MPS > 0 {
		n, err = c.WriteAligned(addr, data, o.MPS)
	} else if len(data) > maxRequestBytes {
		return apperr.Usage(fmt.Errorf("%d bytes in one dma_write: at most %d (use --mps)", len(data), maxRequestBytes))
	} else {
		n, err = c.Write(addr, data)
	}
	if err != nil {
		return apperr.Failed(err)
	}
	fmt.Fprintf(o.Stdout, "wrote %d bytes at %#x\n", n, addr)
	return nil
}

// maxRequestBytes is the most one memory request TLP moves (a Length
// field of 1024 dwords).
const maxRequestBytes = 4096

// checkSplit checks --mrrs or --mps: 0 (one request), or a power of two
// in 128..4096, as PCIe sizes them and every other command takes them.
func checkSplit(flag string, n int) error {
	if n != 0 && (n < 128 || n > maxRequestBytes || n&(n-1) != 0) {
		return apperr.Usage(fmt.Errorf("--%s %d: want 0 (one request) or a power of two in 128..4096", flag, n))
	}
	return nil
}

// parseAddress reads the memory address s of the flag named flag (without
// dashes) as bytesize reads sizes, 0x for hex; its error asks for an
// address, not for a byte count.
func parseAddress(flag, s string) (uint64, error) {
	a, err := bytesize.Parse(flag, s)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: want a memory address like 0x1000 or 4096 (K, M, G, T suffixes: powers of 1024)", flag, s)
	}
	return a, nil
}
