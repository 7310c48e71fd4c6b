// Package httpbody bounds how long an HTTP/1 request's body may take
// after its headers, for the control plane's servers (the manager's API,
// the bridge agent's, the metrics servers): their bodies are small JSON
// documents a client sends at once, and a declared body that never comes
// must not hold a connection for the server's whole ReadTimeout.
package httpbody

import (
	"io"
	"net/http"
	"time"
)

// unreadBodyGrace is how long a connection whose answer said close still
// reads what is left of an unread body: bytes the client is sending then
// are taken, so that the close does not reset the connection before the
// client reads the answer (net/http waits as long for the same reason).
const unreadBodyGrace = 500 * time.Millisecond

// Bound bounds the time a request's body may take after its headers to
// bound (none if bound <= 0), and closes the connection of a request
// answered before its body was read to its end: net/http would otherwise
// read up to 256 KiB of it, before sending the answer and after, until
// the read deadline, for a body that may never come. Keep bound within
// the server's ReadTimeout less its ReadHeaderTimeout, so that ReadTimeout
// stays the bound of the whole request.
//
// A request without a body gets no deadline: net/http reads its connection
// in the background from the start of the handler, and a deadline there
// would cancel the context of a long request.
func Bound(next http.Handler, bound time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		var deadline time.Time
		if bound > 0 {
			// Over HTTP/1 net/http clears it once the body is read to
			// its end, before it reads the connection in the background.
			deadline = time.Now().Add(bound)
			_ = rc.SetReadDeadline(deadline)
		}
		if r.ProtoMajor >= 2 {
			// A stream: its unread body holds no connection.
			next.ServeHTTP(w, r)
			return
		}
		// Connection: close until the body's end is read; a handler's own
		// Connection header stays.
		h := w.Header()
		mark := []string{"close"}
		h["Connection"] = mark
		b := &bodyEnd{ReadCloser: r.Body, onEOF: func() {
			if c := h["Connection"]; len(c) == 1 && &c[0] == &mark[0] {
				delete(h, "Connection")
			}
		}}
		r = r.WithContext(r.Context()) // net/http's request keeps its body
		r.Body = b
		next.ServeHTTP(w, r)
		if !b.eof && bound > 0 {
			// Answered with close: what comes of the body within the
			// grace is read, then the connection closes.
			_ = rc.SetReadDeadline(minTime(deadline, time.Now().Add(unreadBodyGrace)))
		}
	})
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// bodyEnd notes when a request body has been read to its end.
type bodyEnd struct {
	io.ReadCloser
	eof   bool
	onEOF func()
}

func (b *bodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.eof {
		b.eof = true
		b.onEOF()
	}
	return n, err
}
