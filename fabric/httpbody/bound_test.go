package httpbody

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// handler serves /read (reads the body: 200 and its length, or 400) and
// /refuse (401 without reading it); started is closed when a /read began.
func handler(started chan struct{}) http.Handler {
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/read":
			if started != nil {
				once.Do(func() { close(started) })
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintln(w, len(b))
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
}

// serve runs Bound(h, bound) in a server with readTimeout.
func serve(t *testing.T, h http.Handler, bound, readTimeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Bound(h, bound), ReadTimeout: readTimeout}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitfor.Stall)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNoBound: a bound <= 0 sets no deadline of its own: a body that
// comes after the handler began reading is read whole, and the server's
// ReadTimeout, left in force, still closes the connection of a refused
// request whose body never comes.
func TestNoBound(t *testing.T) {
	t.Parallel()
	const readTimeout = 2 * time.Second
	for _, bound := range []time.Duration{0, -time.Second} {
		t.Run(fmt.Sprint("bound ", bound), func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{})
			addr := serve(t, handler(started), bound, readTimeout)
			c := dial(t, addr)
			io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
			select {
			case <-started:
			case <-time.After(waitfor.Stall):
				t.Fatal("the handler never started")
			}
			io.WriteString(c, "0123456789")
			c.SetReadDeadline(time.Now().Add(waitfor.Stall))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("body sent once the handler read: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "10" {
				t.Fatalf("body sent once the handler read, bound %v: %d %q; want 200 \"10\" (no bound)", bound, resp.StatusCode, b)
			}

			s, err := guardtest.StallBody(dial(t, addr), "POST", "/refuse", readTimeout+3*time.Second)
			if err != nil || s.Status != http.StatusUnauthorized {
				t.Fatalf("refused, body never sent, bound %v, ReadTimeout %v: %v, %v; want 401 and the close at ReadTimeout", bound, readTimeout, s, err)
			}
		})
	}
}

// TestGraceWithinBound: the connection of a request answered before its
// body reads what comes of it for unreadBodyGrace, then closes; the grace
// never runs past the body bound, which answers a body never sent at the
// bound.
func TestGraceWithinBound(t *testing.T) {
	t.Parallel()
	const bound = 3 * time.Second
	addr := serve(t, handler(nil), bound, time.Minute)
	within := bound + 3*time.Second // the slack of a loaded machine

	s, err := guardtest.StallBody(dial(t, addr), "POST", "/refuse", within)
	if err != nil {
		t.Fatal(err)
	}
	// A client still sending its body as the answer comes must get to
	// read it: the close waits a grace of some length.
	const minGrace = 100 * time.Millisecond
	if s.Status != http.StatusUnauthorized || s.Closed < max(unreadBodyGrace, minGrace) || s.Closed >= bound {
		t.Errorf("refused, body never sent: %v; want 401, the connection closed after the grace %v (at least %v), before the bound %v", s, unreadBodyGrace, minGrace, bound)
	}

	s, err = guardtest.StallBody(dial(t, addr), "POST", "/read", within)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != http.StatusBadRequest || s.Answered < bound || s.Answered >= bound+2*time.Second {
		t.Errorf("read, body never sent: %v; want 400 at the body bound %v", s, bound)
	}
	if s.Closed-s.Answered >= 250*time.Millisecond {
		t.Errorf("read, body never sent: %v; want the close with the answer at the bound, no grace after it", s)
	}
}

// TestHTTP2RefusedKeepsConnection: over HTTP/2 a request answered before
// its body was read says no Connection: close (the server would end the
// whole connection, every stream on it, with a GOAWAY): the next request
// goes on the same connection.
func TestHTTP2RefusedKeepsConnection(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(Bound(handler(nil), 2*time.Second))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cl := srv.Client()
	cl.Timeout = waitfor.Stall
	resp, err := cl.Post(srv.URL+"/refuse", "application/json", bytes.NewReader(bytes.Repeat([]byte("x"), 1000)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("refused POST: HTTP/%d %d; want HTTP/2 401", resp.ProtoMajor, resp.StatusCode)
	}
	resp, err = cl.Post(srv.URL+"/read", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "2" {
		t.Fatalf("POST after the refused one: %d %q", resp.StatusCode, b)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for two HTTP/2 requests: the refusal ended the first one; want 1", n)
	}
}
