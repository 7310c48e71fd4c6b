// Package agentapi carries the manager's saga steps to bridge agents over
// HTTP+JSON, so that `dxpu manager` can drive bridges in other processes.
//
// A bridge serves a Server (NewServer; under any prefix it likes, usually
// its own https listener) and registers with the manager giving that URL as
// "agent_url" of its box or host. The manager's GPUSide and HostSide send
// each call to the agent of the pair's box or host; a pair whose bridge has
// no agent URL is skipped (that bridge follows the forwarding table
// instead).
//
// # Credentials
//
// The manager issues every agent its own credential (256 random bits) when
// its bridge registers with an agent_url, and answers it, as
// "agent_credential", to the registering caller only (who holds the
// manager's admin token, who stores it in a 0600 file on the bridge's
// machine for the bridge to load with manager.LoadTokenFile, or the bridge
// itself in a lab). The bridge gives it to
// Server.SetCredential; a Server without one refuses every call. The
// manager sends each agent that agent's credential and nothing else: its
// admin token never leaves it, and one agent's credential never reaches
// another (it is not part of a pair's JSON). Re-registering with the same
// agent_url keeps the credential; a new agent_url gets a new one.
//
// The Client reaches agents over https only (ClientConfig.CAs, CAFile or
// RootCAs name the CAs that sign agents' certificates; CAs can be re-read
// while it runs) unless AllowInsecure is set for a lab, and never follows
// a redirect.
//
// # Wire
//
// Every request carries the pair as JSON (manager.Pair) and
// "Authorization: Bearer <the agent's credential>":
//
//	PUT    /agent/v1/pairs/{id}                  program the pair       -> 204
//	DELETE /agent/v1/pairs/{id}                  remove it (idempotent) -> 204
//	POST   /agent/v1/pairs/{id}/hot-add          host bridges only      -> 204
//	POST   /agent/v1/pairs/{id}/hot-remove       host bridges only      -> 204
//	POST   /agent/v1/pairs/{id}/surprise-remove  host bridges only      -> 204
//	GET    /agent/v1/pairs                       {"pairs":[Pair...]} (agents that list)
//
// {id} is the decimal pair ID and must equal the body's "id". A missing or
// wrong credential is 401. Errors use the manager's envelope
// {"error":{"code":"...","message":"..."}}. A worked call:
//
//	PUT /agent/v1/pairs/41
//	Authorization: Bearer 9f2c...(64 hex digits)
//
//	{"id":41,"allocation":"a-3f9c0b6e21d4","host":"h1","host_port":0,
//	 "host_bridge":{"switch_port":"eth1","mac":"02:00:00:00:02:01","ip":"10.2.0.1","udp_port":4791},
//	 "box":"box7","gpu":"box7-g0",
//	 "gpu_bridge":{"switch_port":"eth3","mac":"02:00:00:00:07:00","ip":"10.1.0.7","udp_port":4791},
//	 "bdf":"0000:18:00.0","model":"H100","memory_mib":81920,
//	 "host_agent":"https://10.2.0.1:7701","gpu_agent":"https://10.1.0.7:7701"}
package agentapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/secretfile"
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

// Server serves the agent API for one bridge agent. It accepts only the
// credential the manager issued to this agent (SetCredential); until one is
// set every call is refused, so an agent never runs open.
type Server struct {
	mux  *http.ServeMux
	cred atomic.Pointer[string]
}

// NewServer serves the agent API for impl, which is a GPU-bridge agent
// (PairProgrammer) or a host-bridge agent (manager.HostBridgeProgrammer),
// optionally a manager.PairLister.
func NewServer(impl PairProgrammer) *Server {
	mux := http.NewServeMux()
	host, _ := impl.(manager.HostBridgeProgrammer)
	lister, _ := impl.(manager.PairLister)
	step := func(pattern string, f func(ctx context.Context, p manager.Pair) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			var wp wirePair
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&wp); err != nil {
				writeErr(w, http.StatusBadRequest, "bad_request", "pair body: "+err.Error())
				return
			}
			p, err := wp.pair()
			if err != nil {
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
	return &Server{mux: mux}
}

// SetCredential sets (or, on rotation, replaces) the credential this agent
// accepts: the "agent_credential" of its bridge's registration. Safe while
// serving.
func (s *Server) SetCredential(credential string) { s.cred.Store(&credential) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := s.cred.Load()
	if want == nil || *want == "" {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "this agent has no credential yet; register its bridge and set the agent_credential the manager answers")
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(*want)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dxpu-agent"`)
		writeErr(w, http.StatusUnauthorized, "unauthorized", "agent calls need this agent's credential (Authorization: Bearer ...)")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Handler is NewServer(impl) accepting credential.
func Handler(impl PairProgrammer, credential string) http.Handler {
	s := NewServer(impl)
	s.SetCredential(credential)
	return s
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]*Error{"error": {Code: code, Message: msg}})
}

// Sentinel errors of Client.
var (
	// ErrInsecureAgent: an agent URL over plain http without AllowInsecure.
	ErrInsecureAgent = errors.New("agent reached over plain http")
	// ErrNoCredential: a call for an agent the manager issued no credential.
	ErrNoCredential = errors.New("no credential for agent")
)

// ClientConfig configures NewClient.
type ClientConfig struct {
	// CAs are the CAs that sign agents' certificates, re-read by its
	// Reload (the manager's --agent-ca-file, on SIGHUP): new connections
	// verify against the CAs loaded last. CAFile is a PEM bundle read
	// once into such a pool, RootCAs the same already parsed (with
	// CAFile: added to it). None: the system's roots.
	CAs     *secretfile.CAPool
	CAFile  string
	RootCAs *x509.CertPool
	// AllowInsecure lets calls go to http:// agents (a lab without
	// certificates; credentials then cross the network in clear).
	AllowInsecure bool
	// Timeout bounds one call (default 10s).
	Timeout time.Duration
}

// Client sends agent calls, each with the credential of the agent it goes
// to (Pair.GPUAgentCredential, Pair.HostAgentCredential).
type Client struct {
	AllowInsecure bool
	HTTP          *http.Client // default: NewClient's
}

// NewClient returns a client that reaches agents over https, trusting the
// configured CAs, and never follows redirects (a redirect could carry the
// credential elsewhere).
func NewClient(cfg ClientConfig) (*Client, error) {
	cas := cfg.CAs
	if cas == nil && cfg.CAFile != "" {
		var err error
		if cas, err = secretfile.LoadCAPoolOnto(cfg.RootCAs, "agentapi: agent CA file", cfg.CAFile); err != nil {
			return nil, err
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs}
	var rt http.RoundTripper = tr
	if cas != nil {
		rt = cas.Transport(tr) // RootCAs: the CAs loaded last
	}
	return &Client{AllowInsecure: cfg.AllowInsecure, HTTP: &http.Client{
		Timeout:   cfg.Timeout,
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// check refuses a call that would expose a credential or carry none.
func (c *Client) check(base, credential string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("agent %q: not an http(s) URL", base)
	}
	if u.Scheme == "http" && !c.AllowInsecure {
		return fmt.Errorf("%w: %s (agents are reached over https; AllowInsecure is off)", ErrInsecureAgent, base)
	}
	if credential == "" {
		return fmt.Errorf("%w %s: re-register its bridge so that the manager issues one", ErrNoCredential, base)
	}
	return nil
}

func (c *Client) call(ctx context.Context, base, credential, method, path string, p *manager.Pair, out any) error {
	if err := c.check(base, credential); err != nil {
		return err
	}
	var body io.Reader
	if p != nil {
		wp := wirePair{Pair: *p}
		if method == http.MethodPut && !p.Key.IsZero() {
			// Only programming carries the pair's key, and only to the
			// two agents of the pair.
			wp.Key, wp.KeyGeneration = hex.EncodeToString(p.Key.Key[:]), p.Key.Generation
			wp.KeyPending = p.Key.Pending
		}
		b, err := json.Marshal(wp)
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
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("agent %s: %w", base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		var env struct{ Error *Error }
		if json.Unmarshal(data, &env) == nil && env.Error != nil {
			env.Error.Status = resp.StatusCode
			env.Error.Code = oneline.Cut(env.Error.Code, maxErrCode)
			env.Error.Message = oneline.Cut(env.Error.Message, maxErrMessage)
			return fmt.Errorf("agent %s: %w", base, env.Error)
		}
		return fmt.Errorf("agent %s: %w", base, &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: oneline.Cut(string(data), maxErrBody)})
	}
	if out != nil {
		return json.Unmarshal(data, out)
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

func pairPath(p manager.Pair, suffix string) string {
	return "/agent/v1/pairs/" + strconv.FormatUint(uint64(p.ID), 10) + suffix
}

// ListPairs asks one agent, with its credential, for its pairs.
func (c *Client) ListPairs(ctx context.Context, base, credential string) ([]manager.Pair, error) {
	var out struct{ Pairs []manager.Pair }
	err := c.call(ctx, base, credential, http.MethodGet, "/agent/v1/pairs", nil, &out)
	return out.Pairs, err
}

func (c *Client) listAt(ctx context.Context, base, credential string) ([]manager.Pair, error) {
	ps, err := c.ListPairs(ctx, base, credential)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %v", manager.ErrCannotList, err)
	}
	return ps, err
}

// ListPairsAt implements manager.AgentPairLister.
func (g GPUSide) ListPairsAt(ctx context.Context, url, credential string) ([]manager.Pair, error) {
	return g.Client.listAt(ctx, url, credential)
}

// ListPairsAt implements manager.AgentPairLister.
func (h HostSide) ListPairsAt(ctx context.Context, url, credential string) ([]manager.Pair, error) {
	return h.Client.listAt(ctx, url, credential)
}

// GPUSide is a manager.GPUBridgeProgrammer that calls the agent of each
// pair's box (Pair.GPUAgent).
type GPUSide struct{ Client *Client }

func (g GPUSide) ProgramPair(ctx context.Context, p manager.Pair) error {
	if p.GPUAgent == "" {
		return nil
	}
	return g.Client.call(ctx, p.GPUAgent, p.GPUAgentCredential, http.MethodPut, pairPath(p, ""), &p, nil)
}

func (g GPUSide) RemovePair(ctx context.Context, p manager.Pair) error {
	if p.GPUAgent == "" {
		return nil
	}
	return g.Client.call(ctx, p.GPUAgent, p.GPUAgentCredential, http.MethodDelete, pairPath(p, ""), &p, nil)
}

// HostSide is a manager.HostBridgeProgrammer that calls the agent of each
// pair's host (Pair.HostAgent).
type HostSide struct{ Client *Client }

func (h HostSide) do(ctx context.Context, method, suffix string, p manager.Pair) error {
	if p.HostAgent == "" {
		return nil
	}
	return h.Client.call(ctx, p.HostAgent, p.HostAgentCredential, method, pairPath(p, suffix), &p, nil)
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

// wirePair is a pair as the agent API carries it: the pair's JSON and, when
// the manager programs the pair, its key (64 hex digits) and generation.
// The key travels only in these bodies, over https, to the pair's agents.
// key_pending true is the first phase of a key change (KEY-10): install
// the key next to the one in use, do not switch; the same key again
// without it switches.
type wirePair struct {
	manager.Pair
	Key           string `json:"key,omitempty"`
	KeyGeneration uint32 `json:"key_generation,omitempty"`
	KeyPending    bool   `json:"key_pending,omitempty"`
}

func (wp wirePair) pair() (manager.Pair, error) {
	p := wp.Pair
	if wp.Key == "" {
		if wp.KeyGeneration != 0 || wp.KeyPending {
			return p, fmt.Errorf("key_generation %d or key_pending without a key", wp.KeyGeneration)
		}
		return p, nil
	}
	b, err := hex.DecodeString(wp.Key)
	if err != nil || len(b) != manager.PairKeySize {
		return p, fmt.Errorf("key: want %d hex digits", 2*manager.PairKeySize)
	}
	if wp.KeyGeneration == 0 {
		return p, errors.New("key without a key_generation (1 or more)")
	}
	copy(p.Key.Key[:], b)
	p.Key.Generation = wp.KeyGeneration
	p.Key.Pending = wp.KeyPending
	return p, nil
}
