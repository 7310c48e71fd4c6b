package qemuproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrTooManyFDs is a message that carried more descriptors than any
// command uses; they are closed and the connection is dropped.
var ErrTooManyFDs = errors.New("qemuproxy: more file descriptors than a message may carry")

// Conn is the device's end of a proxy socket. ReadMsg is for one reader
// goroutine; WriteRet may be called from any goroutine.
type Conn struct {
	c    *net.UnixConn
	wmu  sync.Mutex
	wbuf [HeaderLen + retLen]byte
	hdr  [HeaderLen]byte
	pay  [sysmemLen]byte
	oob  []byte
	fds  []int
}

// NewConn wraps c, the socket QEMU's x-pci-proxy-dev was given.
func NewConn(c *net.UnixConn) *Conn {
	return &Conn{c: c, oob: make([]byte, unix.CmsgSpace(4*(MaxFDs+1)))}
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// ReadMsg reads one message and the descriptors that came with it. A
// malformed message is a *MsgError; its descriptors are closed, and since
// the stream can no longer be trusted to be in step, the caller should
// close the connection. io.EOF means QEMU closed its end between messages
// (the device was unplugged or QEMU exited); a stream that ends inside a
// message is an error wrapping io.ErrUnexpectedEOF that names the part
// (header or the command's payload).
func (c *Conn) ReadMsg() (Msg, error) {
	c.fds = c.fds[:0]
	if err := c.readFull(c.hdr[:]); err != nil {
		c.closeFDs()
		if errors.Is(err, io.EOF) {
			return Msg{}, err // between messages: QEMU closed its end
		}
		return Msg{}, fmt.Errorf("qemuproxy: message header: %w", err)
	}
	cmd, n, err := ParseHeader(c.hdr[:])
	if err != nil {
		c.closeFDs()
		return Msg{}, err
	}
	if err := c.readFull(c.pay[:n]); err != nil {
		c.closeFDs()
		return Msg{}, fmt.Errorf("qemuproxy: %v payload: %w", cmd, unexpectedEOF(err))
	}
	m, err := ParsePayload(cmd, c.pay[:n], len(c.fds))
	if err != nil {
		c.closeFDs()
		return Msg{}, err
	}
	if len(c.fds) > 0 {
		m.FDs = append([]int(nil), c.fds...)
	}
	return m, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readFull fills p from the stream, collecting SCM_RIGHTS descriptors
// that arrive with any of its bytes.
func (c *Conn) readFull(p []byte) error {
	for got := 0; got < len(p); {
		n, oobn, _, _, err := c.c.ReadMsgUnix(p[got:], c.oob)
		if oobn > 0 {
			if ferr := c.takeFDs(c.oob[:oobn]); ferr != nil {
				return ferr
			}
		}
		got += n
		if err != nil {
			if got > 0 && errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if n == 0 && oobn == 0 {
			if got > 0 {
				return io.ErrUnexpectedEOF
			}
			return io.EOF
		}
	}
	return nil
}

func (c *Conn) takeFDs(oob []byte) error {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("qemuproxy: control message: %w", err)
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue // not SCM_RIGHTS
		}
		c.fds = append(c.fds, fds...)
	}
	if len(c.fds) > MaxFDs {
		return ErrTooManyFDs
	}
	return nil
}

func (c *Conn) closeFDs() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = c.fds[:0]
}

// WriteRet answers the request QEMU is waiting on with v.
func (c *Conn) WriteRet(v uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := AppendRet(c.wbuf[:0], v)
	_, err := c.c.Write(b)
	return err
}
