package manager_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// A newcomer that finds the listener full cuts the connection pending
// longest among those whose request the server has not left unread: a
// client whose whole request sits unread in its socket (the server behind,
// on a loaded machine) outlives newcomers that keep arriving, where by age
// alone the third one cut it. Here nobody serves the listener, as a server
// too loaded to read.
func TestNewcomerSparesAnUnreadRequest(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := manager.LimitListenerWith(raw, manager.ConnLimits{MaxConns: 4, Reserved: 1})
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(what string, request bool) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if request {
			if _, err := io.WriteString(c, "GET /v1/stats HTTP/1.1\r\nHost: m\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		waitfor.Receive(t, accepted, what+" accepted")
		return c
	}
	// cut reports whether the listener closed c's server side.
	cut := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}
	var slow []net.Conn
	for range 3 { // the anonymous share: MaxConns-Reserved
		slow = append(slow, dial("a slow client", false))
	}
	admin := dial("the client with a request", true) // cuts slow[0]
	var late []net.Conn
	for range 3 {
		late = append(late, dial("a newcomer", false))
	}
	if cut(admin) {
		t.Fatalf("the connection whose request sat unread was cut by the newcomers")
	}
	for i, c := range slow {
		if !cut(c) {
			t.Errorf("slow client %d, pending longest, was not cut", i)
		}
	}
	if !cut(late[0]) {
		t.Errorf("the first newcomer, the oldest pending without a request waiting, was not cut in the admin's place")
	}
}
