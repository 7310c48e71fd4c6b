// Package agentapi carries the manager's saga steps to bridge agents over
// HTTP+JSON, so that `dxpu manager` can drive bridges in other processes.
//
// A bridge serves Handler (under any prefix it likes, usually its own
// listener) and registers with the manager giving that URL as "agent_url"
// of its box or host. The manager's GPUSide and HostSide send each call to
// the agent of the pair's box or host; a pair whose bridge has no agent URL
// is skipped (that bridge follows the forwarding table instead).
//
// # Wire
//
// Every request carries the pair as JSON (manager.Pair) and, when a token is
// set, "Authorization: Bearer <token>":
//
//	PUT    /agent/v1/pairs/{id}                  program the pair       -> 204
//	DELETE /agent/v1/pairs/{id}                  remove it (idempotent) -> 204
//	POST   /agent/v1/pairs/{id}/hot-add          host bridges only      -> 204
//	POST   /agent/v1/pairs/{id}/hot-remove       host bridges only      -> 204
//	POST   /agent/v1/pairs/{id}/surprise-remove  host bridges only      -> 204
//	GET    /agent/v1/pairs                       {"pairs":[Pair...]} (agents that list)
//
// {id} is the decimal pair ID and must equal the body's "id". Errors use the
// manager's envelope {"error":{"code":"...","message":"..."}}. A worked
// call:
//
//	PUT /agent/v1/pairs/41
//	{"id":41,"allocation":"a-3f9c0b6e21d4","host":"h1","host_port":0,
//	 "host_bridge":{"switch_port":"eth1","mac":"02:00:00:00:02:01","ip":"10.2.0.1","udp_port":4791},
//	 "box":"box7","gpu":"box7-g0",
//	 "gpu_bridge":{"switch_port":"eth3","mac":"02:00:00:00:07:00","ip":"10.1.0.7","udp_port":4791},
//	 "bdf":"0000:18:00.0","model":"H100","memory_mib":81920,
//	 "host_agent":"http://10.2.0.1:7701","gpu_agent":"http://10.1.0.7:7701"}
package agentapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
)

// PairProgrammer is what every agent implements.
type PairProgrammer interface {
	ProgramPair(ctx context.Context, p manager.Pair) error
	RemovePair(ctx context.Context, p manager.Pair) error
}

// Error is an agent's error response.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("agent: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Handler serves the agent API for impl, which is a GPU-bridge agent
// (PairProgrammer) or a host-bridge agent (manager.HostBridgeProgrammer),
// optionally a manager.PairLister. Token, if set, is required on every call.
func Handler(impl PairProgrammer, token string) http.Handler {
	mux := http.NewServeMux()
	host, _ := impl.(manager.HostBridgeProgrammer)
	lister, _ := impl.(manager.PairLister)
	step := func(pattern string, f func(ctx context.Context, p manager.Pair) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			var p manager.Pair
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				writeErr(w, http.StatusBadRequest, "bad_request", "pair body: "+err.Error())
				return
			}
			id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
			if err != nil || uint32(id) != p.ID || p.ID == 0 || p.ID > 1<<24-1 {
				writeErr(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("path pair id %q does not match body id %d (1..16777215)", r.PathValue("id"), p.ID))
				return
			}
			if err := f(r.Context(), p); err != nil {
				writeErr(w, http.StatusBadGateway, "agent_failed", err.Error())
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	step("PUT /agent/v1/pairs/{id}", impl.ProgramPair)
	step("DELETE /agent/v1/pairs/{id}", impl.RemovePair)
	if host != nil {
		step("POST /agent/v1/pairs/{id}/hot-add", host.HotAdd)
		step("POST /agent/v1/pairs/{id}/hot-remove", host.HotRemove)
		step("POST /agent/v1/pairs/{id}/surprise-remove", host.SurpriseRemove)
	}
	if lister != nil {
		mux.HandleFunc("GET /agent/v1/pairs", func(w http.ResponseWriter, r *http.Request) {
			ps, err := lister.ListPairs(r.Context())
			if err != nil {
				writeErr(w, http.StatusBadGateway, "agent_failed", err.Error())
				return
			}
			if ps == nil {
				ps = []manager.Pair{}
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string][]manager.Pair{"pairs": ps})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s on this agent", r.Method, r.URL.Path))
	})
	if token == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(token)) != 1 {
			writeErr(w, http.StatusUnauthorized, "unauthorized", "agent calls need the bearer token")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]*Error{"error": {Code: code, Message: msg}})
}

// Client sends agent calls.
type Client struct {
	Token string
	HTTP  *http.Client // default: 10s timeout
}

func (c *Client) call(ctx context.Context, base, method, path string, p *manager.Pair, out any) error {
	var body io.Reader
	if p != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("agent %s: %w", base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		var env struct{ Error *Error }
		if json.Unmarshal(data, &env) == nil && env.Error != nil {
			env.Error.Status = resp.StatusCode
			return fmt.Errorf("agent %s: %w", base, env.Error)
		}
		return fmt.Errorf("agent %s: %w", base, &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(data))})
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func pairPath(p manager.Pair, suffix string) string {
	return "/agent/v1/pairs/" + strconv.FormatUint(uint64(p.ID), 10) + suffix
}

// ListPairs asks one agent for its pairs.
func (c *Client) ListPairs(ctx context.Context, base string) ([]manager.Pair, error) {
	var out struct{ Pairs []manager.Pair }
	err := c.call(ctx, base, http.MethodGet, "/agent/v1/pairs", nil, &out)
	return out.Pairs, err
}

func (c *Client) listAt(ctx context.Context, base string) ([]manager.Pair, error) {
	ps, err := c.ListPairs(ctx, base)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %v", manager.ErrCannotList, err)
	}
	return ps, err
}

// ListPairsAt implements manager.AgentPairLister.
func (g GPUSide) ListPairsAt(ctx context.Context, url string) ([]manager.Pair, error) {
	return g.Client.listAt(ctx, url)
}

// ListPairsAt implements manager.AgentPairLister.
func (h HostSide) ListPairsAt(ctx context.Context, url string) ([]manager.Pair, error) {
	return h.Client.listAt(ctx, url)
}

// GPUSide is a manager.GPUBridgeProgrammer that calls the agent of each
// pair's box (Pair.GPUAgent).
type GPUSide struct{ Client *Client }

func (g GPUSide) ProgramPair(ctx context.Context, p manager.Pair) error {
	if p.GPUAgent == "" {
		return nil
	}
	return g.Client.call(ctx, p.GPUAgent, http.MethodPut, pairPath(p, ""), &p, nil)
}

func (g GPUSide) RemovePair(ctx context.Context, p manager.Pair) error {
	if p.GPUAgent == "" {
		return nil
	}
	return g.Client.call(ctx, p.GPUAgent, http.MethodDelete, pairPath(p, ""), &p, nil)
}

// HostSide is a manager.HostBridgeProgrammer that calls the agent of each
// pair's host (Pair.HostAgent).
type HostSide struct{ Client *Client }

func (h HostSide) do(ctx context.Context, method, suffix string, p manager.Pair) error {
	if p.HostAgent == "" {
		return nil
	}
	return h.Client.call(ctx, p.HostAgent, method, pairPath(p, suffix), &p, nil)
}

func (h HostSide) ProgramPair(ctx context.Context, p manager.Pair) error {
	return h.do(ctx, http.MethodPut, "", p)
}
func (h HostSide) RemovePair(ctx context.Context, p manager.Pair) error {
	return h.do(ctx, http.MethodDelete, "", p)
}
func (h HostSide) HotAdd(ctx context.Context, p manager.Pair) error {
	return h.do(ctx, http.MethodPost, "/hot-add", p)
}
func (h HostSide) HotRemove(ctx context.Context, p manager.Pair) error {
	return h.do(ctx, http.MethodPost, "/hot-remove", p)
}
func (h HostSide) SurpriseRemove(ctx context.Context, p manager.Pair) error {
	return h.do(ctx, http.MethodPost, "/surprise-remove", p)
}

// IsAgentError reports whether err came from an agent's error response.
func IsAgentError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
