package guardtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Stalled is what a server did with a request whose body never came.
type Stalled struct {
	Status   int    // the answer's status, 0 if the connection closed without one
	Body     string // the answer's body
	Answered time.Duration
	Closed   time.Duration // both from the end of the headers
}

func (s Stalled) String() string {
	body, _, _ := strings.Cut(strings.TrimSpace(s.Body), "\n")
	if len(body) > 120 {
		body = body[:120] + "..."
	}
	return fmt.Sprintf("answered %d after %v (%s), closed after %v",
		s.Status, s.Answered.Round(time.Millisecond), body, s.Closed.Round(time.Millisecond))
}

// StallBody sends the headers of method path on c, with the extra header
// lines hdr and "Content-Length: 1000" (unless hdr sets
// Transfer-Encoding), and no body; it reads the answer, if one comes, and
// waits for the server to close c, at most within from the headers.
func StallBody(c net.Conn, method, path string, within time.Duration, hdr ...string) (Stalled, error) {
	req := method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	chunked := false
	for _, h := range hdr {
		req += h + "\r\n"
		chunked = chunked || strings.HasPrefix(strings.ToLower(h), "transfer-encoding:")
	}
	if !chunked {
		req += "Content-Length: 1000\r\n"
	}
	start := time.Now()
	c.SetDeadline(start.Add(within))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return Stalled{}, err
	}
	var s Stalled
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	s.Answered = time.Since(start)
	if err != nil {
		s.Closed = s.Answered
		if isTimeout(err) {
			return s, fmt.Errorf("no answer and still open %v after the headers", within)
		}
		return s, nil // closed without an answer
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.Status, s.Body = resp.StatusCode, string(b)
	if err != nil && isTimeout(err) {
		return s, fmt.Errorf("answer %d still unfinished %v after the headers", s.Status, within)
	}
	_, err = br.ReadByte()
	s.Closed = time.Since(start)
	switch {
	case err == nil:
		return s, fmt.Errorf("%v; then more data, want the close", s)
	case isTimeout(err):
		return s, fmt.Errorf("answered %d after %v, still open %v after the headers", s.Status, s.Answered.Round(time.Millisecond), within)
	}
	return s, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
