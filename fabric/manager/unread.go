package manager

import (
	"bytes"
	"container/list"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxPeek bounds the pending connections one newcomer looks at for a
// victim (a system call each, under the listener's lock).
const maxPeek = 16

// What a pending connection's socket holds that the server has not read.
const (
	nothingUnread = iota // the server read what came: a slow client
	partUnread           // bytes, not a whole request header (or TLS)
	requestUnread        // a whole request header: the server is behind
)

// pendingVictim returns the connection of pend (pending, oldest first) to
// cut for a newcomer, or nil when none may be cut. Spared are those whose
// whole request the server has read (Read: its ConnState waits for l.mu,
// which a burst of newcomers holds) and those whose whole request waits
// unread in the socket (the server behind, on a loaded machine): cut by age
// alone, an admin whose request was in hand was cut by a burst of slow
// connections (seen in CI as a reset). Of the rest it takes the one pending
// longest with nothing unread in its socket (a slowloris's bytes are read
// as they drip: it waits in the server's reader with an empty socket),
// else the one pending longest. It looks at maxPeek connections at most,
// with l.mu held.
func (l *admitListener) pendingVictim(pend *list.List) *admitConn {
	var partly *admitConn
	n := 0
	for e := pend.Front(); e != nil && n < maxPeek; e = e.Next() {
		c := e.Value.(*admitConn)
		n++
		if c.whole.Load() {
			continue
		}
		switch l.unread(c.Conn) {
		case nothingUnread:
			return c
		case partUnread:
			if partly == nil {
				partly = c
			}
		}
	}
	return partly
}

// unread says what c's socket holds that the server has not read
// (nothingUnread when it cannot tell). With l.mu held: it peeks into
// l.peek.
func (l *admitListener) unread(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nothingUnread
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nothingUnread
	}
	n := 0
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = unix.Recvfrom(int(fd), l.peek[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	}); err != nil || rerr != nil || n <= 0 {
		return nothingUnread
	}
	if bytes.Contains(l.peek[:n], []byte("\r\n\r\n")) {
		return requestUnread
	}
	return partUnread
}

// Read notes when the server has read a whole request header: from then
// on the connection is not a slow client's, though the server may not
// have told the listener yet (its ConnState waits for l.mu, which a burst
// of newcomers holds).
func (c *admitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.whole.Load() {
		if headerEnd(c.tail[:], p[:n]) {
			c.whole.Store(true)
		}
		c.tail = lastBytes(c.tail, p[:n])
	}
	return n, err
}

// headerEnd reports whether the bytes read so far, ending in tail and
// then b, hold the blank line that ends a request header.
func headerEnd(tail, b []byte) bool {
	if bytes.Contains(b, []byte("\r\n\r\n")) || bytes.Contains(b, []byte("\n\n")) {
		return true
	}
	var join [6]byte
	k := copy(join[:], tail)
	k += copy(join[k:], b[:min(len(b), 3)])
	return bytes.Contains(join[:k], []byte("\r\n\r\n")) || bytes.Contains(join[:k], []byte("\n\n"))
}

// lastBytes returns the last three bytes of tail followed by b.
func lastBytes(tail [3]byte, b []byte) [3]byte {
	if len(b) >= 3 {
		return [3]byte(b[len(b)-3:])
	}
	var out [3]byte
	all := append(tail[:], b...)
	copy(out[:], all[len(all)-3:])
	return out
}
