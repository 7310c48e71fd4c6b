package httpguard_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
)

// bodyHandler serves the cases of the body tests:
//
//	/refuse?status=S[&close=1][&flush=1]  answers S without reading the body, sent before the handler returns with flush
//	/read[?close=1]             reads the body to its end: 200 and its length, or 400
//	/long?for=D                 no body; waits D or the request's end: "ok" or "cancelled"
func bodyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("close") == "1" {
			w.Header().Set("Connection", "close")
		}
		switch r.URL.Path {
		case "/refuse":
			status, _ := strconv.Atoi(r.URL.Query().Get("status"))
			w.WriteHeader(status)
			fmt.Fprintln(w, "refused")
			if r.URL.Query().Get("flush") == "1" {
				http.NewResponseController(w).Flush()
			}
		case "/read":
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintln(w, len(b))
		case "/long":
			d, _ := time.ParseDuration(r.URL.Query().Get("for"))
			select {
			case <-r.Context().Done():
				fmt.Fprintln(w, "cancelled")
			case <-time.After(d):
				fmt.Fprintln(w, "ok")
			}
		}
	})
}

// serveBody serves bodyHandler through httpguard.New with cfg.
func serveBody(t *testing.T, cfg httpguard.Config) string {
	t.Helper()
	srv := httpguard.New("test", bodyHandler(), cfg, httpguard.MetricsDefaults, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln, nil) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNetHTTPHoldsUnreadBody pins down what BodyBound works around: a
// handler that answers without reading a declared body (a refusal) has its
// answer held by net/http, which first reads the body for keep-alive, until
// the read deadline; with "Connection: close" the answer goes at once, but
// the connection is still held until the read deadline (net/http reads the
// body once more when it closes it).
func TestNetHTTPHoldsUnreadBody(t *testing.T) {
	t.Parallel()
	const readTimeout = time.Second
	srv := &http.Server{Handler: bodyHandler(), ReadTimeout: readTimeout}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	for _, status := range []int{401, 403, 413, 429} {
		for _, closing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d close=%v", status, closing), func(t *testing.T) {
				t.Parallel()
				path := fmt.Sprintf("/refuse?status=%d", status)
				if closing {
					path += "&close=1"
				}
				s, err := guardtest.StallBody(dial(t, ln.Addr().String()), "POST", path, readTimeout+3*time.Second)
				if err != nil {
					t.Fatalf("net/http, %s without a body: %v", path, err)
				}
				if s.Status != status {
					t.Fatalf("net/http, %s without a body: %v", path, s)
				}
				if held := s.Answered >= readTimeout/2; held == closing {
					t.Errorf("net/http, %s without a body: %v; want the answer held until the read deadline (%v) only without Connection: close", path, s, readTimeout)
				}
				if s.Closed < readTimeout/2 {
					t.Errorf("net/http, %s without a body: %v; want the connection held until the read deadline (%v)", path, s, readTimeout)
				}
			})
		}
	}
}

// TestBodyBound: through httpguard.New a declared body that never comes
// is cut off BodyTimeout after the headers, however long ReadTimeout is;
// an answer that did not read the body goes at once and closes the
// connection; a body sent in two parts, a handler's own Connection: close
// and a long request without a body are served as before.
func TestBodyBound(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Second
	within := bound + 3*time.Second // the slack of a loaded machine
	addr := serveBody(t, httpguard.Config{BodyTimeout: bound, ReadTimeout: time.Minute})

	for _, status := range []int{401, 403, 413, 429} {
		for _, flush := range []bool{false, true} {
			t.Run(fmt.Sprintf("refused %d flush=%v", status, flush), func(t *testing.T) {
				t.Parallel()
				path := fmt.Sprintf("/refuse?status=%d", status)
				if flush {
					path += "&flush=1" // the answer goes while the handler runs
				}
				s, err := guardtest.StallBody(dial(t, addr), "POST", path, within)
				if err != nil {
					t.Fatalf("%s without a body: %v", path, err)
				}
				if s.Status != status || s.Answered >= bound/2 || s.Closed >= bound {
					t.Errorf("%s without a body: %v; want %d at once and the connection closed before the body bound %v", path, s, status, bound)
				}
			})
		}
	}
	for _, te := range []string{"Content-Length", "Transfer-Encoding: chunked"} {
		t.Run("read "+te, func(t *testing.T) {
			t.Parallel()
			var hdr []string
			if strings.HasPrefix(te, "Transfer") {
				hdr = append(hdr, te)
			}
			s, err := guardtest.StallBody(dial(t, addr), "POST", "/read", within, hdr...)
			if err != nil {
				t.Fatalf("body never sent (%s), body bound %v, ReadTimeout 1m: %v", te, bound, err)
			}
			if s.Status != http.StatusBadRequest || s.Answered < bound {
				t.Errorf("body never sent (%s): %v; want 400 at the body bound %v", te, s, bound)
			}
		})
	}
	t.Run("two parts", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		br := bufio.NewReader(c)
		io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
		time.Sleep(100 * time.Millisecond) // the client's pause between the parts, the case tested
		io.WriteString(c, "56789")
		if status, body := readAnswer(t, "body in two parts", c, br); status != http.StatusOK || body != "10" {
			t.Fatalf("body in two parts 100ms apart: %d %q, want 200 \"10\"", status, body)
		}
		io.WriteString(c, "GET /read HTTP/1.1\r\nHost: x\r\n\r\n")
		if status, body := readAnswer(t, "next request on the connection after a body read to its end (kept alive)", c, br); status != http.StatusOK || body != "0" {
			t.Fatalf("next request on the connection after a body read to its end: %d %q, want 200 \"0\" (kept alive)", status, body)
		}
	})
	t.Run("own close", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		io.WriteString(c, "POST /read?close=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
		if status, _ := readAnswer(t, "handler's own Connection: close", c, bufio.NewReader(c)); status != http.StatusOK {
			t.Fatalf("handler's own Connection: close: %d", status)
		}
		if err := guardtest.WaitClosed(c, within); err != nil {
			t.Errorf("handler's own Connection: close, body read to its end: %v; want it closed", err)
		}
	})
	t.Run("long without a body", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		fmt.Fprintf(c, "GET /long?for=%v HTTP/1.1\r\nHost: x\r\n\r\n", bound+time.Second)
		if status, body := readAnswer(t, "request without a body past the body bound", c, bufio.NewReader(c)); status != http.StatusOK || body != "ok" {
			t.Errorf("request without a body running %v, past the body bound %v: %d %q, want 200 \"ok\" (its context not cancelled)", bound+time.Second, bound, status, body)
		}
	})
}

// TestBodyBoundWithinReadTimeout: ReadTimeout stays the bound of the whole
// request, headers and body, whatever BodyTimeout says.
func TestBodyBoundWithinReadTimeout(t *testing.T) {
	t.Parallel()
	const readTimeout = 2 * time.Second
	addr := serveBody(t, httpguard.Config{ReadHeaderTimeout: time.Second, ReadTimeout: readTimeout, BodyTimeout: time.Minute})
	s, err := guardtest.StallBody(dial(t, addr), "POST", "/read", readTimeout+3*time.Second)
	if err != nil {
		t.Fatalf("body never sent, ReadTimeout %v, BodyTimeout 1m: %v", readTimeout, err)
	}
	if s.Status != http.StatusBadRequest {
		t.Errorf("body never sent: %v; want 400 within ReadTimeout %v", s, readTimeout)
	}
}

// readAnswer reads the answer to what on c: its status and body, trimmed.
func readAnswer(t *testing.T, what string, c net.Conn, br *bufio.Reader) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", what, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, strings.TrimSpace(string(b))
}
