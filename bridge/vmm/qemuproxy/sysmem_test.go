package qemuproxy

import (
	"errors"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/vmm"
)

// overlapShapes are a second region against [0x10000, 0x20000), every way
// two ranges can lie: the overlapping ones must be refused, the adjacent
// ones taken.
var overlapShapes = []struct {
	name    string
	r       Region
	overlap bool
}{
	{"inside", Region{GPA: 0x14000, Size: 0x4000}, true},
	{"straddling the start", Region{GPA: 0x8000, Size: 0xc000}, true},
	{"straddling the end", Region{GPA: 0x18000, Size: 0x10000}, true},
	{"covering", Region{GPA: 0x8000, Size: 0x20000}, true},
	{"identical", Region{GPA: 0x10000, Size: 0x10000}, true},
	{"one byte at the start", Region{GPA: 0x10000, Size: 1}, true},
	{"one byte at the end", Region{GPA: 0x1ffff, Size: 1}, true},
	{"adjacent below", Region{GPA: 0x8000, Size: 0x8000}, false},
	{"adjacent above", Region{GPA: 0x20000, Size: 0x10000}, false},
}

// TestSysmemOverlapShapes: SYNC_SYSMEM regions that overlap in any shape
// are refused naming both, in either order; adjacent ones are a valid map.
// GuestRAM.Replace, the map the server installs, refuses the same.
func TestSysmemOverlapShapes(t *testing.T) {
	t.Parallel()
	base := Region{GPA: 0x10000, Size: 0x10000}
	for _, tc := range overlapShapes {
		for _, order := range [][2]Region{{base, tc.r}, {tc.r, base}} {
			p := AppendMsg(nil, Msg{Cmd: SyncSysmem, Regions: order[:]})[HeaderLen:]
			m, err := ParsePayload(SyncSysmem, p, 2)
			var me *MsgError
			switch {
			case tc.overlap && (!errors.Is(err, ErrField) || !errors.As(err, &me) || me.Field != "gpas[1] overlaps gpas[0]"):
				t.Errorf("%s (%#x+%#x, %#x+%#x): %v, want gpas[1] overlaps gpas[0]", tc.name, order[0].GPA, order[0].Size, order[1].GPA, order[1].Size, err)
			case !tc.overlap && (err != nil || len(m.Regions) != 2):
				t.Errorf("%s (%#x+%#x, %#x+%#x): %v, want a two-region map", tc.name, order[0].GPA, order[0].Size, order[1].GPA, order[1].Size, err)
			}

			var ram vmm.GuestRAM
			regs := []vmm.RAMRegion{{GPA: order[0].GPA, Mem: make([]byte, order[0].Size)}, {GPA: order[1].GPA, Mem: make([]byte, order[1].Size)}}
			if err := ram.Replace(regs, nil); (err != nil) != tc.overlap {
				t.Errorf("%s: GuestRAM.Replace: %v, want refused %v", tc.name, err, tc.overlap)
			}
		}
	}
}

// TestSysmemFDLimit: a SYNC_SYSMEM carries at most REMOTE_MAX_FDS = 8
// regions, one descriptor each (see the proxy protocol reference): 8 are
// taken, 9 refused, and all 9 descriptors are closed, both when the
// payload is parsed and when they arrive on the socket.
func TestSysmemFDLimit(t *testing.T) {
	t.Parallel()
	regions := func(n int) []Region {
		rs := make([]Region, n)
		for i := range rs {
			rs[i] = Region{GPA: uint64(i) << 20, Size: 1 << 20}
		}
		return rs
	}
	p := AppendMsg(nil, Msg{Cmd: SyncSysmem, Regions: regions(8)})[HeaderLen:]
	if m, err := ParsePayload(SyncSysmem, p, 8); err != nil || len(m.Regions) != 8 {
		t.Fatalf("8 regions, 8 fds: %v (%d regions)", err, len(m.Regions))
	}
	if _, err := ParsePayload(SyncSysmem, p, 9); !errors.Is(err, ErrFDs) {
		t.Fatalf("8 regions, 9 fds: %v, want ErrFDs", err)
	}

	for _, n := range []int{8, 9} {
		// The descriptors sent are copies of a pipe's write end: once every
		// copy the reader got is closed, the read end sees EOF.
		var pfd [2]int
		if err := unix.Pipe2(pfd[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			t.Fatal(err)
		}
		rd := os.NewFile(uintptr(pfd[0]), "pipe-r")
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(fds[0]), "server")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		c := NewConn(nc.(*net.UnixConn))
		send := make([]int, n)
		for i := range send {
			send[i] = pfd[1]
		}
		// Eight region slots are all the payload has; the ninth fd comes
		// with them.
		msg := AppendMsg(nil, Msg{Cmd: SyncSysmem, Regions: regions(8)})
		if err := unix.Sendmsg(fds[1], msg, unix.UnixRights(send...), nil, 0); err != nil {
			t.Fatal(err)
		}
		unix.Close(pfd[1])
		m, err := c.ReadMsg()
		switch {
		case n == 8 && (err != nil || len(m.FDs) != 8):
			t.Errorf("8 fds on the socket: %v, %d fds", err, len(m.FDs))
		case n == 9 && !errors.Is(err, ErrTooManyFDs):
			t.Errorf("9 fds on the socket: %v (%d fds), want ErrTooManyFDs", err, len(m.FDs))
		}
		closeAll(m.FDs)
		var b [1]byte
		if k, err := unix.Read(pfd[0], b[:]); k != 0 || err != nil {
			t.Errorf("%d fds: a received descriptor is still open (read %d, %v)", n, k, err)
		}
		c.Close()
		unix.Close(fds[1])
		rd.Close()
	}
}
