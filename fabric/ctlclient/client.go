// Package ctlclient is the Go client of the manager's HTTP API (/v1), used
// by `dxpu ctl` and by `dxpu switch` (which long-polls the forwarding table
// with WatchTable).
//
// A Client may name several managers sharing one store, comma-separated
// in Base: a call that a standby refuses (503 not_leader) or whose
// connection never opened goes to the next one; nothing else is retried,
// since another manager may already have carried it out.
//
// An error response comes back as *APIError, carrying the HTTP status and
// the stable code of the body
//
//	{"error": {"code": "insufficient_gpus", "message": "..."}}
//
// or, for a body that is not the manager's (a proxy's error page), the
// code "http_<status>" and the body as the message. Transport errors come
// back as the net/http client returns them.
package ctlclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/sim"
)

// APIError is an error response of the manager.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// IsCode reports whether err is an APIError with the code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// Client talks to a manager, or to the first leader among several.
type Client struct {
	// Base is the manager's URL, e.g. http://127.0.0.1:7700, or several
	// separated by commas (managers sharing etcd): a call that a standby
	// refuses (503 not_leader) or that cannot connect is sent to the next.
	Base string
	// Token is sent as a bearer token on every call.
	Token string
	// HTTP defaults to a client with a 60s timeout.
	HTTP *http.Client
}

// New returns a client for base with token.
func New(base, token string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}
}

func (c *Client) bases() []string {
	var out []string
	for _, b := range strings.Split(c.Base, ",") {
		if b = strings.TrimRight(strings.TrimSpace(b), "/"); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	bases := c.bases()
	if len(bases) == 0 {
		return errors.New("ctlclient: no manager URL")
	}
	var err error
	for _, base := range bases {
		err = c.doOne(ctx, base, method, path, body, in != nil, out)
		// Only retry what the other manager certainly did not process: a
		// standby's refusal, or a connection that never opened.
		var op *net.OpError
		if IsCode(err, "not_leader") || (errors.As(err, &op) && op.Op == "dial") {
			continue
		}
		return err
	}
	return err
}

func (c *Client) doOne(ctx context.Context, base, method, path string, body []byte, hasBody bool, out any) error {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var env struct {
			Error *APIError `json:"error"`
		}
		if json.Unmarshal(data, &env) == nil && env.Error != nil {
			env.Error.Status = resp.StatusCode
			env.Error.Code = oneline.Cut(env.Error.Code, maxErrCode)
			env.Error.Message = oneline.Cut(env.Error.Message, maxErrMessage)
			return env.Error
		}
		return &APIError{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: oneline.Cut(string(data), maxErrBody)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding response: %w", method, path, err)
	}
	return nil
}

// The bounds of what an error message repeats of a response: the message
// of a JSON error body, and a body that is not one (a proxy's HTML page).
const (
	maxErrCode    = 64
	maxErrMessage = 3 << 10
	maxErrBody    = 200
)

// Health is the body of /healthz.
type Health struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	ID     string `json:"id"`
}

// Healthz asks whether the manager is up and whether it leads.
func (c *Client) Healthz(ctx context.Context) (Health, error) {
	var h Health
	err := c.do(ctx, http.MethodGet, "/healthz", nil, &h)
	return h, err
}

// Stats returns GPU counts.
func (c *Client) Stats(ctx context.Context) (pool.Stats, error) {
	var s pool.Stats
	err := c.do(ctx, http.MethodGet, "/v1/stats", nil, &s)
	return s, err
}

// Boxes lists boxes.
func (c *Client) Boxes(ctx context.Context) ([]pool.Box, error) {
	var out struct{ Boxes []pool.Box }
	err := c.do(ctx, http.MethodGet, "/v1/boxes", nil, &out)
	return out.Boxes, err
}

// Box returns one box.
func (c *Client) Box(ctx context.Context, id string) (pool.Box, error) {
	var b pool.Box
	err := c.doID(ctx, http.MethodGet, "boxes", "box", id, "", nil, &b)
	return b, err
}

// RegisterBox adds or replaces a box.
func (c *Client) RegisterBox(ctx context.Context, b pool.Box) (pool.Box, error) {
	var out pool.Box
	err := c.do(ctx, http.MethodPost, "/v1/boxes", b, &out)
	return out, err
}

// RegisterBoxAgent registers a box like RegisterBox and also returns the
// credential the manager issued to the box's agent (empty without an
// agent_url): the bridge's agent must accept exactly that (agentapi).
func (c *Client) RegisterBoxAgent(ctx context.Context, b pool.Box) (pool.Box, string, error) {
	var out struct {
		pool.Box
		AgentCredential string `json:"agent_credential"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/boxes", b, &out)
	return out.Box, out.AgentCredential, err
}

// RegisterBoxJSON is RegisterBoxAgent for a box given as JSON, sent as
// it is: the manager's strict decoding (duplicate keys, keys in another
// case) judges what the user wrote, not a re-encoding of it.
func (c *Client) RegisterBoxJSON(ctx context.Context, box []byte) (pool.Box, string, error) {
	var out struct {
		pool.Box
		AgentCredential string `json:"agent_credential"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/boxes", json.RawMessage(box), &out)
	return out.Box, out.AgentCredential, err
}

// RemoveBox removes a box with no GPU lent.
func (c *Client) RemoveBox(ctx context.Context, id string) (pool.Box, error) {
	var out pool.Box
	err := c.doID(ctx, http.MethodDelete, "boxes", "box", id, "", nil, &out)
	return out, err
}

// DrainResult is the answer to Drain.
type DrainResult struct {
	Box         pool.Box `json:"box"`
	Allocations []string `json:"allocations"`
}

// Drain stops (on) or resumes (off) allocations on a box.
func (c *Client) Drain(ctx context.Context, box string, on bool) (DrainResult, error) {
	verb := "drain"
	if !on {
		verb = "undrain"
	}
	var out DrainResult
	err := c.doID(ctx, http.MethodPost, "boxes", "box", box, "/"+verb, nil, &out)
	return out, err
}

// Hosts lists hosts.
func (c *Client) Hosts(ctx context.Context) ([]pool.Host, error) {
	var out struct{ Hosts []pool.Host }
	err := c.do(ctx, http.MethodGet, "/v1/hosts", nil, &out)
	return out.Hosts, err
}

// RegisterHost adds or replaces a host.
func (c *Client) RegisterHost(ctx context.Context, h pool.Host) (pool.Host, error) {
	var out pool.Host
	err := c.do(ctx, http.MethodPost, "/v1/hosts", h, &out)
	return out, err
}

// RegisterHostAgent registers a host like RegisterHost and also returns the
// credential the manager issued to the host's agent (empty without an
// agent_url).
func (c *Client) RegisterHostAgent(ctx context.Context, h pool.Host) (pool.Host, string, error) {
	var out struct {
		pool.Host
		AgentCredential string `json:"agent_credential"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/hosts", h, &out)
	return out.Host, out.AgentCredential, err
}

// RegisterHostJSON is RegisterHostAgent for a host given as JSON, sent
// as it is (RegisterBoxJSON).
func (c *Client) RegisterHostJSON(ctx context.Context, host []byte) (pool.Host, string, error) {
	var out struct {
		pool.Host
		AgentCredential string `json:"agent_credential"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/hosts", json.RawMessage(host), &out)
	return out.Host, out.AgentCredential, err
}

// RemoveHost removes a host holding no GPUs.
func (c *Client) RemoveHost(ctx context.Context, id string) (pool.Host, error) {
	var out pool.Host
	err := c.doID(ctx, http.MethodDelete, "hosts", "host", id, "", nil, &out)
	return out, err
}

// GPUs lists GPUs, optionally of one box and in one state (free, used,
// unhealthy).
func (c *Client) GPUs(ctx context.Context, box, state string) ([]pool.GPU, error) {
	q := url.Values{}
	if box != "" {
		q.Set("box", box)
	}
	if state != "" {
		q.Set("state", state)
	}
	path := "/v1/gpus"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct{ GPUs []pool.GPU }
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.GPUs, err
}

// SetGPUHealth marks a GPU healthy or unhealthy.
func (c *Client) SetGPUHealth(ctx context.Context, gpu string, h pool.Health) (pool.HealthChange, error) {
	var out pool.HealthChange
	err := c.doID(ctx, http.MethodPost, "gpus", "GPU", gpu, "/health", map[string]pool.Health{"health": h}, &out)
	return out, err
}

// SetRTT records a measured RTT.
func (c *Client) SetRTT(ctx context.Context, r pool.RTT) error {
	return c.do(ctx, http.MethodPut, "/v1/rtt", r, nil)
}

// Allocate asks for GPUs.
func (c *Client) Allocate(ctx context.Context, req pool.Request) (pool.Allocation, error) {
	var out pool.Allocation
	err := c.do(ctx, http.MethodPost, "/v1/allocations", req, &out)
	return out, err
}

// Free releases an allocation.
func (c *Client) Free(ctx context.Context, id string) (pool.Allocation, error) {
	var out pool.Allocation
	err := c.doID(ctx, http.MethodDelete, "allocations", "allocation", id, "", nil, &out)
	return out, err
}

// Rekey has the manager give every pair of an allocation a fresh key.
func (c *Client) Rekey(ctx context.Context, id string) (pool.Allocation, error) {
	var out pool.Allocation
	err := c.doID(ctx, http.MethodPost, "allocations", "allocation", id, "/rekey", nil, &out)
	return out, err
}

// Allocations lists allocations, of one host if host is set.
func (c *Client) Allocations(ctx context.Context, host string) ([]pool.Allocation, error) {
	path := "/v1/allocations"
	if host != "" {
		path += "?host=" + url.QueryEscape(host)
	}
	var out struct{ Allocations []pool.Allocation }
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Allocations, err
}

// Allocation returns one allocation.
func (c *Client) Allocation(ctx context.Context, id string) (pool.Allocation, error) {
	var out pool.Allocation
	err := c.doID(ctx, http.MethodGet, "allocations", "allocation", id, "", nil, &out)
	return out, err
}

// Table returns the forwarding table.
func (c *Client) Table(ctx context.Context) (table.Table, error) {
	var t table.Table
	err := c.do(ctx, http.MethodGet, "/v1/table", nil, &t)
	return t, err
}

// WatchTable long-polls until the table's version differs from version, or
// timeout passes (then it returns the unchanged table). The timeout is cut
// to fit inside the HTTP client's own.
func (c *Client) WatchTable(ctx context.Context, version uint64, timeout time.Duration) (table.Table, error) {
	if c.HTTP != nil && c.HTTP.Timeout > 0 && timeout > c.HTTP.Timeout-5*time.Second {
		timeout = max(c.HTTP.Timeout-5*time.Second, c.HTTP.Timeout/2)
	}
	var t table.Table
	path := fmt.Sprintf("/v1/table?watch=1&version=%d&timeout=%s", version, sim.FormatDuration(timeout))
	err := c.do(ctx, http.MethodGet, path, nil, &t)
	return t, err
}

// RTTs lists measured RTTs.
func (c *Client) RTTs(ctx context.Context) ([]pool.RTT, error) {
	var out struct{ RTT []pool.RTT }
	err := c.do(ctx, http.MethodGet, "/v1/rtt", nil, &out)
	return out.RTT, err
}

// Event is one entry of GET /v1/events.
type Event = pool.Event

// Events returns the events after since (of one host if host is set) and
// the since of the next call. With wait > 0 it long-polls up to wait for
// the first one.
func (c *Client) Events(ctx context.Context, since uint64, host string, wait time.Duration) ([]Event, uint64, error) {
	q := url.Values{}
	q.Set("since", strconv.FormatUint(since, 10))
	if host != "" {
		q.Set("host", host)
	}
	if wait > 0 {
		if c.HTTP != nil && c.HTTP.Timeout > 0 && wait > c.HTTP.Timeout-5*time.Second {
			wait = max(c.HTTP.Timeout-5*time.Second, c.HTTP.Timeout/2)
		}
		q.Set("watch", "1")
		q.Set("timeout", sim.FormatDuration(wait))
	}
	var out struct {
		Events []Event `json:"events"`
		Next   uint64  `json:"next"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, &out)
	return out.Events, out.Next, err
}

// ErrBadID: an ID that names no one object, empty or a dot segment:
// in the URL path it would reach another route of the API (an empty
// allocation ID was DELETE /v1/allocations/, an empty box ID listed every
// box).
var ErrBadID = errors.New(`want a non-empty ID, not "." or ".."`)

// doID is do on /v1/coll/ID followed by suffix, with the ID of a kind
// of object escaped as one segment of the path, or ErrBadID.
func (c *Client) doID(ctx context.Context, method, coll, kind, id, suffix string, body, out any) error {
	if id == "" || id == "." || id == ".." {
		return fmt.Errorf("%s ID %q: %w", kind, id, ErrBadID)
	}
	return c.do(ctx, method, "/v1/"+coll+"/"+url.PathEscape(id)+suffix, body, out)
}
