// Package guardtest checks a running httpguard server from outside, as
// the daemons' tests do with their real servers: the caps per address and
// in all, and the idle timeout. Tests only.
package guardtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Dial connects to addr from the loopback address from (127.0.0.x).
func Dial(t testing.TB, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Get sends GET path on c (keep-alive, with the extra header lines hdr)
// and reads the answer: its status, or an error if the connection was
// closed without one.
func Get(c net.Conn, path string, hdr ...string) (int, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	for _, h := range hdr {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Refused says whether c was refused: answered 503 or closed without an
// answer.
func Refused(c net.Conn, path string) error {
	code, err := Get(c, path)
	switch {
	case err != nil:
		return nil // closed, reset
	case code == http.StatusServiceUnavailable:
		return nil
	}
	return fmt.Errorf("served (%d), want refused", code)
}

// WaitClosed waits (at most within) for the server to close c.
func WaitClosed(c net.Conn, within time.Duration) error {
	c.SetReadDeadline(time.Now().Add(within))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", within)
	}
	if err == nil {
		return errors.New("read data, want the close")
	}
	return nil
}

// closedBy counts the connections of cs the server has closed (a read
// sees the end at once; an open silent one times out).
func closedBy(cs []net.Conn) int {
	n := 0
	for _, c := range cs {
		if WaitClosed(c, 20*time.Millisecond) == nil {
			n++
		}
		c.SetReadDeadline(time.Time{})
	}
	return n
}

// CheckServer checks the plain-http server on addr, configured with
// perAddr connections per address and idle timeout idle: perAddr silent
// connections from 127.0.0.1 are held and the next one from there is
// refused; a client on 127.0.0.2 is still served (GET path with hdr
// answers want), and its keep-alive connection is closed once idle for
// about idle.
func CheckServer(t *testing.T, addr, path string, perAddr int, idle time.Duration, want int, hdr ...string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		held := make([]net.Conn, perAddr)
		for i := range held {
			held[i] = Dial(t, "127.0.0.1", addr)
		}
		err := Refused(Dial(t, "127.0.0.1", addr), path)
		if err == nil {
			break
		}
		// The held connections are silent, and the server closes a
		// silent one after idle: on a loaded machine one may have gone
		// before the extra one came (CI), which then rightly had room.
		// Only with all of them still open is the cap broken.
		if n := closedBy(held); n > 0 && attempt < 5 {
			for _, c := range held {
				c.Close()
			}
			continue
		}
		t.Errorf("connection %d from 127.0.0.1 (cap %d per address): %v", perAddr+1, perAddr, err)
		break
	}
	other := Dial(t, "127.0.0.2", addr)
	if code, err := Get(other, path, hdr...); err != nil || code != want {
		t.Fatalf("GET %s from 127.0.0.2 beside the full 127.0.0.1: %d, %v; want %d", path, code, err, want)
	}
	start := time.Now()
	if err := WaitClosed(other, idle+3*time.Second); err != nil {
		t.Errorf("idle keep-alive connection (idle timeout %v): %v", idle, err)
	} else if d := time.Since(start); d < idle/2 {
		t.Errorf("idle connection closed after %v, before the idle timeout %v", d, idle)
	}
}

// IsLoopbackAliasUsable reports whether 127.0.0.2 can be bound (Linux
// routes all of 127/8 to lo); the caller skips otherwise.
func IsLoopbackAliasUsable() bool {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Served dials addr from from and sends GET path (with hdr) until it is
// answered want, for up to 5s: a connection that makes room for it may
// not be idle yet in the server's eyes when the client has read its
// answer. It returns the connection, kept alive.
func Served(t testing.TB, from, addr, path string, want int, hdr ...string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := Dial(t, from, addr)
		code, err := Get(c, path, hdr...)
		if err == nil && code == want {
			return c
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("GET %s from %s: %d, %v; want %d", path, from, code, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
