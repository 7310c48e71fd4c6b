package agentapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
)

// agentAnswer is a RoundTripper that answers every call with one canned
// response: what an agent, or whatever answers at its URL, sent back.
type agentAnswer struct {
	status int
	body   []byte
}

func (a agentAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: a.status, Status: http.StatusText(a.status), Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// maxAgentErrLen bounds the error an agent's answer may make: the manager
// logs it and quotes it in its own API errors.
const maxAgentErrLen = 4096

// FuzzClientResponse decodes arbitrary agent answers through the
// manager's agent client. Every error is one non-empty line of bounded
// length, a non-2xx answer is an error, and a listing that does not decode
// is an error.
func FuzzClientResponse(f *testing.F) {
	f.Add(uint16(200), []byte(`{"pairs":[{"id":5,"allocation":"a","host":"h","host_port":0,"box":"b","gpu":"b-0","bdf":"0000:41:00.0","held_generation":3}]}`))
	f.Add(uint16(204), []byte{})
	f.Add(uint16(400), []byte(`{"error":{"code":"bad_request","message":"body: unexpected EOF"}}`))
	f.Add(uint16(401), []byte(`{"error":{"code":"unauthorized","message":"agent calls need the credential"}}`))
	f.Add(uint16(404), []byte("404 page not found\n"))
	f.Add(uint16(200), []byte(`{"pairs":null}`))
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		st := 200 + int(status)%400
		c := &agentapi.Client{AllowInsecure: true, HTTP: &http.Client{Transport: agentAnswer{st, body}, Timeout: time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		ctx := context.Background()
		check := func(call string, err error) {
			if err == nil {
				if st >= 300 {
					t.Fatalf("%s: status %d accepted", call, st)
				}
				return
			}
			msg := err.Error()
			if msg == "" || strings.ContainsAny(msg, "\r\n") || len(msg) > maxAgentErrLen {
				t.Fatalf("%s: status %d, body %.200q: error is not one bounded line (%d bytes): %.300q", call, st, body, len(msg), msg)
			}
		}
		_, err := c.ListPairs(ctx, "http://agent.invalid:7701", "cred")
		check("ListPairs", err)
		p := manager.Pair{ID: 5, Allocation: "a", GPUAgent: "http://box.invalid:7701", GPUAgentCredential: "c1",
			HostAgent: "http://host.invalid:7701", HostAgentCredential: "c2"}
		check("ProgramPair", agentapi.GPUSide{Client: c}.ProgramPair(ctx, p))
		check("HotAdd", agentapi.HostSide{Client: c}.HotAdd(ctx, p))
	})
}
