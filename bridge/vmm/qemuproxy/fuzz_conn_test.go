package qemuproxy

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzReadMsg plays QEMU sending an arbitrary byte stream, with nfds
// descriptors (copies of a pipe's write end) attached to the byte at
// offset at, and reads messages off the device's end until the first
// error. Every error is one non-empty line; no more messages come out than
// whole headers went in; a message keeps exactly the descriptors its
// command takes; and once the reader has closed what it was handed, no
// copy of the descriptors is left open (the pipe's read end sees EOF):
// a malformed message leaks nothing.
func FuzzReadMsg(f *testing.F) {
	for _, m := range []Msg{
		{Cmd: BarRead, Bar: BarAccess{Addr: 0xfc000000, Size: 4, Memory: true}},
		{Cmd: CfgWrite, Cfg: CfgAccess{Addr: 4, Val: 6, Len: 2}},
		{Cmd: Ret, Value: 7},
		{Cmd: DeviceReset},
	} {
		f.Add(AppendMsg(nil, m), uint8(0), uint16(0))
	}
	sync := AppendMsg(nil, Msg{Cmd: SyncSysmem, Regions: []Region{{GPA: 0, Size: 1 << 20}, {GPA: 1 << 32, Size: 1 << 20, Offset: 4096}}})
	f.Add(sync, uint8(2), uint16(0))
	f.Add(sync, uint8(2), uint16(HeaderLen+3))
	f.Add(append(AppendMsg(nil, Msg{Cmd: SetIRQFD}), sync...), uint8(2), uint16(0))
	f.Add(sync[:HeaderLen+10], uint8(1), uint16(4))
	f.Add(sync, uint8(9), uint16(0))
	f.Fuzz(func(t *testing.T, stream []byte, nfds uint8, at uint16) {
		n := int(nfds % (MaxFDs + 3))
		var pfd [2]int
		if err := unix.Pipe2(pfd[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(pfd[0])
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			unix.Close(pfd[1])
			t.Fatal(err)
		}
		file := os.NewFile(uintptr(sp[0]), "device")
		nc, err := net.FileConn(file)
		file.Close()
		if err != nil {
			unix.Close(sp[1])
			unix.Close(pfd[1])
			t.Fatal(err)
		}
		c := NewConn(nc.(*net.UnixConn))
		defer c.Close()
		// QEMU's side: the stream, fds riding on one byte of it, then EOF.
		sent := make(chan error, 1)
		go func() {
			err := qemuSend(sp[1], pfd[1], stream, n, min(int(at), len(stream)))
			// Both closed before the reader hears of it: what is open
			// after is the reader's.
			unix.Close(sp[1])
			unix.Close(pfd[1])
			sent <- err
		}()
		msgs := 0
		for {
			m, err := c.ReadMsg()
			if err != nil {
				if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
					t.Fatalf("error is not one line: %q", msg)
				}
				break
			}
			msgs++
			if msgs > len(stream)/HeaderLen {
				t.Fatalf("%d messages from %d bytes", msgs, len(stream))
			}
			want := 0
			switch m.Cmd {
			case SetIRQFD:
				want = 2
			case SyncSysmem:
				want = len(m.Regions)
			}
			if len(m.FDs) != want {
				t.Fatalf("%v came with %d descriptors, takes %d", m.Cmd, len(m.FDs), want)
			}
			for _, fd := range m.FDs {
				unix.Close(fd)
			}
		}
		c.Close() // QEMU may still be writing: let it finish, then check
		if err := <-sent; err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
			t.Fatalf("sending: %v", err)
		}
		var b [1]byte
		if k, err := unix.Read(pfd[0], b[:]); k != 0 || err != nil {
			t.Fatalf("a descriptor QEMU sent is still open after the reader gave up (read: %d, %v)", k, err)
		}
	})
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		k, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}

// qemuSend writes stream to fd with n copies of pass attached to the byte
// at off (none when n is 0 or off is the end).
func qemuSend(fd, pass int, stream []byte, n, off int) error {
	if n == 0 || off == len(stream) {
		return writeAll(fd, stream)
	}
	if err := writeAll(fd, stream[:off]); err != nil {
		return err
	}
	fds := make([]int, n)
	for i := range fds {
		fds[i] = pass
	}
	if err := unix.Sendmsg(fd, stream[off:off+1], unix.UnixRights(fds...), nil, 0); err != nil {
		return err
	}
	return writeAll(fd, stream[off+1:])
}
