package ctlclient_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/pool"
)

// answer is a RoundTripper that answers every request with one canned
// response: what a manager, or whatever sits at its address (a proxy, a
// load balancer, another service), sent back.
type answer struct {
	status int
	body   []byte
}

func (a answer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: a.status, Status: http.StatusText(a.status), Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// maxErrLen bounds the error a response may make: a line for a terminal,
// not the response body.
const maxErrLen = 4096

// FuzzResponse decodes arbitrary manager responses through the client's
// calls. Every error is one non-empty line of bounded length (the command
// line prints it as its one line of error), and a response with a 2xx
// status that does not decode is an error, not a zero value.
func FuzzResponse(f *testing.F) {
	f.Add(uint16(200), []byte(`{"status":"ok","role":"leader","id":"m1"}`))
	f.Add(uint16(200), []byte(`{"id":"a-1","host":"h","state":"active","gpus":[{"gpu":"b-0","box":"b","pair":1}]}`))
	f.Add(uint16(400), []byte(`{"error":{"code":"bad_request","message":"field count: got JSON string, want int"}}`))
	f.Add(uint16(503), []byte(`{"error":{"code":"not_leader","message":"standby; the leader is http://m2"}}`+"\n"))
	f.Add(uint16(502), []byte("upstream down\n"))
	f.Add(uint16(200), []byte(`{"version":1,"pairs":[]}`))
	f.Add(uint16(200), []byte(`{"events":[],"next":3}`))
	f.Add(uint16(204), []byte{})
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		st := 200 + int(status)%400
		c := &ctlclient.Client{Base: "http://manager.invalid", Token: "t", HTTP: &http.Client{Transport: answer{st, body}, Timeout: time.Second}}
		ctx := context.Background()
		check := func(call string, err error) {
			if err == nil {
				if st >= 300 {
					t.Fatalf("%s: status %d accepted", call, st)
				}
				return
			}
			msg := err.Error()
			if msg == "" || strings.ContainsAny(msg, "\r\n") || len(msg) > maxErrLen {
				t.Fatalf("%s: status %d, body %.200q: error is not one bounded line (%d bytes): %.300q", call, st, body, len(msg), msg)
			}
		}
		_, err := c.Healthz(ctx)
		check("Healthz", err)
		_, err = c.Stats(ctx)
		check("Stats", err)
		_, err = c.Allocate(ctx, pool.Request{Host: "h", Count: 1})
		check("Allocate", err)
		_, _, err = c.RegisterBoxAgent(ctx, pool.Box{ID: "b"})
		check("RegisterBoxAgent", err)
		_, err = c.Table(ctx)
		check("Table", err)
		_, _, err = c.Events(ctx, 0, "", 0)
		check("Events", err)
		_, err = c.GPUs(ctx, "", "")
		check("GPUs", err)
	})
}
