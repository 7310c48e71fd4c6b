package mmsg

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// One sendmmsg moves several datagrams, one recvmmsg takes them in order;
// an empty socket reports nothing queued (Ctl: Done 0, Err nil; Fn:
// false, to wait) and Peek says so without taking anything.
func TestCallAndPeek(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	closed := false
	defer func() {
		if !closed {
			unix.Close(fds[1])
		}
	}()
	a, b := uintptr(fds[0]), uintptr(fds[1])

	const n = 5
	var tx, rx [n]unix.Mmsghdr
	var txIov, rxIov [n]unix.Iovec
	var out [n][]byte
	var in [n][64]byte
	for i := range n {
		out[i] = []byte(fmt.Sprintf("datagram %d%s", i, bytes.Repeat([]byte{'.'}, i)))
		txIov[i].Base = &out[i][0]
		txIov[i].SetLen(len(out[i]))
		tx[i].Hdr.Iov = &txIov[i]
		tx[i].Hdr.SetIovlen(1)
		rxIov[i].Base = &in[i][0]
		rxIov[i].SetLen(len(in[i]))
		rx[i].Hdr.Iov = &rxIov[i]
		rx[i].Hdr.SetIovlen(1)
	}
	var send, recv Call
	send.Init(unix.SYS_SENDMMSG, &tx[0], 0)
	recv.Init(unix.SYS_RECVMMSG, &rx[0], unix.MSG_DONTWAIT)
	peek := NewPeek()

	recv.N = n
	recv.Done, recv.Err = 7, unix.EIO // stale: an empty socket must clear them
	recv.Ctl(b)
	if recv.Done != 0 || recv.Err != nil {
		t.Fatalf("recvmmsg on an empty socket: Done %d, Err %v; want 0, nil", recv.Done, recv.Err)
	}
	if recv.Fn(b) {
		t.Fatal("Fn on an empty socket reported done: a RawConn.Read would not wait")
	}
	if peek.Fn(b) {
		t.Fatal("Peek on an empty socket reported something queued")
	}

	send.N = n
	if !send.Fn(a) || send.Err != nil || send.Done != n {
		t.Fatalf("sendmmsg: Done %d, Err %v; want %d sent", send.Done, send.Err, n)
	}
	// Peek was woken (it said nothing was there, then RawConn.Read
	// waits): it reports true without looking, then looks again.
	if !peek.Fn(b) || !peek.Fn(b) {
		t.Fatal("Peek with datagrams queued reported none")
	}
	recv.Ctl(b)
	if recv.Done != n || recv.Err != nil {
		t.Fatalf("recvmmsg: Done %d, Err %v; want %d", recv.Done, recv.Err, n)
	}
	for i := range n {
		if got := in[i][:rx[i].Len]; !bytes.Equal(got, out[i]) {
			t.Errorf("datagram %d: got %q, want %q", i, got, out[i])
		}
	}
	// Starting further into the array: Hdrs moved.
	send.Hdrs, send.N = &tx[3], 2
	if !send.Fn(a) || send.Done != 2 {
		t.Fatalf("sendmmsg from header 3: Done %d, Err %v", send.Done, send.Err)
	}
	recv.N = 1
	recv.Ctl(b)
	if got := in[0][:rx[0].Len]; recv.Done != 1 || !bytes.Equal(got, out[3]) {
		t.Fatalf("after sending from header 3: got %q (Done %d), want %q", got, recv.Done, out[3])
	}
	// An error is reported, not taken for "nothing queued".
	unix.Close(fds[1])
	closed = true
	recv.Ctl(b)
	if recv.Err == nil {
		t.Fatal("recvmmsg on a closed descriptor: no error")
	}
}
