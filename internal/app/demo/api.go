package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// api calls the manager's HTTP handler in process, as a client with the
// demo's token would over the network.
func api(h http.Handler, method, path string, body, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequest(method, path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("demo: %s %s: %w", method, path, err)
	}
	req.RequestURI, req.RemoteAddr = path, "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer demo-token")
	req.Header.Set("Content-Type", "application/json")
	rec := &response{header: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.code >= 300 {
		return fmt.Errorf("demo: %s %s: %d %s", method, path, rec.code, bytes.TrimSpace(rec.body.Bytes()))
	}
	if out != nil {
		return json.Unmarshal(rec.body.Bytes(), out)
	}
	return nil
}

// response is an http.ResponseWriter that keeps what the handler wrote.
type response struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *response) Header() http.Header { return r.header }

func (r *response) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *response) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
