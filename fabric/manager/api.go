package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/strictjson"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

// MaxWatch bounds one long-poll (table or events watch), whatever timeout
// it asks for.
const MaxWatch = 5 * time.Minute

func (m *Manager) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", m.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.cfg.Registry, promhttp.HandlerOpts{}))

	v1 := func(pattern string, h func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error)) {
		mux.HandleFunc(pattern, m.v1(h))
	}
	v1("GET /v1/stats", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return p.Stats(), nil
	})
	v1("GET /v1/boxes", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		bs := p.Boxes()
		for i := range bs {
			bs[i] = m.withReach(bs[i])
		}
		return map[string]any{"boxes": bs}, nil
	})
	v1("GET /v1/boxes/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		b, err := p.Box(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return m.withReach(b), nil
	})
	v1("POST /v1/boxes", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		var b pool.Box
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		nb, cred, err := m.enrolBox(r.Context(), b)
		return boxRegistration{nb, cred}, err
	})
	v1("DELETE /v1/boxes/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return m.RemoveBox(r.Context(), r.PathValue("id"))
	})
	drain := func(on bool) func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
			b, allocs, err := m.Drain(r.Context(), r.PathValue("id"), on)
			if err != nil {
				return nil, err
			}
			if allocs == nil {
				allocs = []string{}
			}
			return map[string]any{"box": b, "allocations": allocs}, nil
		}
	}
	v1("POST /v1/boxes/{id}/drain", drain(true))
	v1("POST /v1/boxes/{id}/undrain", drain(false))
	v1("GET /v1/hosts", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return map[string]any{"hosts": p.Hosts()}, nil
	})
	v1("GET /v1/hosts/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return p.Host(r.PathValue("id"))
	})
	v1("POST /v1/hosts", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		var h pool.Host
		if err := decode(r, &h); err != nil {
			return nil, err
		}
		nh, cred, err := m.enrolHost(r.Context(), h)
		return hostRegistration{nh, cred}, err
	})
	v1("DELETE /v1/hosts/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return m.RemoveHost(r.Context(), r.PathValue("id"))
	})
	v1("GET /v1/gpus", m.listGPUs)
	v1("GET /v1/gpus/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		g, err := p.GPU(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return m.withGPUReach(g), nil
	})
	v1("POST /v1/gpus/{id}/health", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		var body struct {
			Health pool.Health `json:"health"`
		}
		if err := decode(r, &body); err != nil {
			return nil, err
		}
		if body.Health == "" {
			return nil, badRequest("field health is required")
		}
		ch, err := m.SetGPUHealth(r.Context(), r.PathValue("id"), body.Health)
		if err != nil {
			return nil, err
		}
		return ch, nil
	})
	v1("GET /v1/rtt", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return map[string]any{"rtt": p.RTTs()}, nil
	})
	v1("PUT /v1/rtt", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		var rt pool.RTT
		if err := decode(r, &rt); err != nil {
			return nil, err
		}
		if rt.Host == "" || rt.Box == "" {
			return nil, badRequest("fields host and box are required")
		}
		return rt, m.SetRTT(r.Context(), rt)
	})
	v1("GET /v1/allocations", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		all := p.Allocations()
		h := r.URL.Query().Get("host")
		out := all[:0]
		for _, a := range all {
			if h == "" || a.Host == h {
				out = append(out, m.withLinkState(a))
			}
		}
		return map[string]any{"allocations": out}, nil
	})
	v1("GET /v1/allocations/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		a, err := p.Allocation(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return m.withLinkState(a), nil
	})
	v1("POST /v1/allocations", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		var req pool.Request
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		if req.Host == "" {
			return nil, badRequest("field host is required")
		}
		if req.Count == 0 {
			return nil, badRequest("field count is required (at least 1)")
		}
		a, err := m.Allocate(r.Context(), req)
		if errors.Is(err, pool.ErrDuplicate) {
			return a, nil // a retry of a request that was served: 200 and the same allocation
		}
		if err != nil {
			return nil, err
		}
		w.WriteHeader(http.StatusCreated)
		return a, nil
	})
	v1("DELETE /v1/allocations/{id}", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return m.Release(r.Context(), r.PathValue("id"))
	})
	v1("POST /v1/allocations/{id}/rekey", func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
		return m.Rekey(r.Context(), r.PathValue("id"))
	})
	v1("GET /v1/table", m.getTable)
	v1("GET /v1/events", m.getEvents)
	mux.HandleFunc("POST /v1/agent/pairs/{id}/link-down", m.agentLinkDown) // the agent's credential, not a token
	mux.HandleFunc("POST /v1/agent/pairs/{id}/link-up", m.agentLinkUp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("no route %s %s", oneline.Cut(r.Method, maxEcho), oneline.Cut(r.URL.Path, maxEcho))})
	})
	return mux
}

// v1 wraps a handler with authentication, the leader check and JSON
// encoding. A handler that has written a status (201) leaves it in place.
func (m *Manager) v1(h func(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ae := m.authorize(r); ae != nil {
			m.metrics.unauthorized.Inc()
			if ae.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="dxpu"`)
			}
			writeError(w, ae)
			return
		}
		p, err := m.livePool()
		if err != nil {
			msg := "this manager is a standby"
			if l := m.leaderHint(r.Context()); l != "" {
				msg += "; the leader is " + l
			}
			writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeNotLeader, Message: msg})
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		v, err := h(sw, r, p)
		if err != nil {
			ae := apiErrorOf(err)
			if id := r.PathValue("id"); len(id) > maxEcho {
				// The pool's messages name the ID asked for.
				one := *ae
				one.Message = strings.ReplaceAll(one.Message, id, oneline.Cut(id, maxEcho))
				ae = &one
			}
			writeError(w, ae)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if sw.status == 0 {
			w.WriteHeader(http.StatusOK)
		}
		json.NewEncoder(w).Encode(v)
	}
}

// boxRegistration and hostRegistration answer a registration: the bridge
// as registered and, when it has an agent_url, the credential its agent
// must require (only the admin may register, so only the admin sees it).
type boxRegistration struct {
	pool.Box
	AgentCredential string `json:"agent_credential,omitempty"`
}

type hostRegistration struct {
	pool.Host
	AgentCredential string `json:"agent_credential,omitempty"`
}

// statusWriter delays WriteHeader so handlers may choose 201 before the body.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.Header().Set("Content-Type", "application/json")
	s.ResponseWriter.WriteHeader(code)
}

func writeError(w http.ResponseWriter, e *APIError) {
	// One line: a saga's undo errors come joined by newlines, and a
	// client prints the message as its one line of error.
	// At most maxErrorMessage bytes, whatever the message repeats.
	one := *e
	one.Message = oneline.Cut(strings.ReplaceAll(strings.TrimSpace(e.Message), "\n", "; "), maxErrorMessage)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(map[string]*APIError{"error": &one})
}

// decode reads one JSON object into v, strictly: keys must be exactly the
// JSON names of v's fields (unknown ones and other spellings, "HOST" for
// "host", are refused), each at most once per object, and nothing but
// white space may follow the object. A body over maxBody is 413. Every
// refusal is one line naming the field or offset that is wrong.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeBadRequest,
				Message: fmt.Sprintf("request body larger than %d bytes", maxBody)}
		}
		return badRequest("reading the request body: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		var dur *pool.DurationError
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; want a JSON object")
		case errors.As(err, &syn):
			return badRequest(fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn))
		case errors.As(err, &typ):
			return badRequest(fmt.Sprintf("field %s: got JSON %s, want %s", typ.Field, typ.Value, typ.Type))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return badRequest("unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field "))
		case errors.As(err, &dur):
			field := "duration"
			switch v.(type) {
			case *pool.Request:
				field = "max_rtt"
			case *pool.RTT:
				field = "rtt"
			}
			return badRequest(fmt.Sprintf("field %s: %v", field, dur))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("malformed JSON: body ends in the middle of a value")
		default:
			return badRequest("malformed JSON: " + err.Error())
		}
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(body[end:], " \t\r\n"); len(rest) > 0 {
		return badRequest(fmt.Sprintf("trailing data after the JSON object at byte %d", int(end)+len(body[end:])-len(rest)))
	}
	if bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
		return badRequest("request body is not a JSON object") // null: nothing else decodes into a struct
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	return answerOnly(v)
}

// checkKeys checks the JSON value in body against type t
// (strictjson.Check: keys given once, spelled as their fields, none
// unknown), in the API's words.
func checkKeys(body []byte, t reflect.Type) error {
	err := strictjson.Check(body, t, true)
	var ke *strictjson.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	at := oneline.Cut(ke.Path, maxEcho)
	switch ke.Err {
	case strictjson.ErrDuplicate:
		return badRequest(fmt.Sprintf("duplicate field %q", at))
	case strictjson.ErrCase:
		return badRequest(fmt.Sprintf("field %q: field names are case-sensitive; want %q", at, oneline.Cut(ke.Want, maxEcho)))
	case strictjson.ErrUnknown:
		return badRequest(fmt.Sprintf("unknown field %q", at))
	case strictjson.ErrDepth:
		return badRequest(fmt.Sprintf("field %s: JSON nested deeper than %d levels", at, strictjson.MaxDepth))
	}
	return badRequest(oneline.Cut(ke.Error(), maxEcho))
}

// answerOnly refuses, in a box or host to register, the fields the
// manager fills in on its answers (never stored from a registration, so
// they would be dropped without a word).
func answerOnly(v any) error {
	set := func(field, why string) error {
		return badRequest(fmt.Sprintf("field %s is %s, not registered; leave it out", field, why))
	}
	switch x := v.(type) {
	case *pool.Box:
		if x.Unreachable != nil {
			return set("unreachable", "reported by the manager")
		}
		for i, g := range x.GPUs {
			switch {
			case g.Allocation != "":
				return set(fmt.Sprintf("gpus[%d].allocation", i), "set by the manager when it lends the GPU")
			case g.Unreachable != nil:
				return set(fmt.Sprintf("gpus[%d].unreachable", i), "reported by the manager")
			}
		}
	case *pool.Host:
		if x.UsedPorts != 0 {
			return set("used_ports", "counted by the manager")
		}
	}
	return nil
}

// maxErrorMessage bounds an error message.
const maxErrorMessage = 4 << 10

// maxEcho bounds what an error message repeats of the request (a path,
// an ID, a key).
const maxEcho = 128

func (m *Manager) healthz(w http.ResponseWriter, r *http.Request) {
	role := "standby"
	if m.Leading() {
		role = "leader"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"status": "ok", "role": role, "id": m.cfg.ID})
}

func (m *Manager) listGPUs(w http.ResponseWriter, r *http.Request, p *pool.Pool) (any, error) {
	q := r.URL.Query()
	box, state := q.Get("box"), q.Get("state")
	switch state {
	case "", "free", "used", "unhealthy":
	default:
		return nil, badRequest(fmt.Sprintf("parameter state %q: want free, used or unhealthy", state))
	}
	var draining map[string]bool
	if state == "free" {
		draining = map[string]bool{}
		for _, b := range p.Boxes() {
			draining[b.ID] = b.Draining
		}
	}
	out := []pool.GPU{}
	for _, g := range p.GPUs() {
		if box != "" && g.Box != box {
			continue
		}
		switch state {
		case "free":
			if g.Allocation != "" || g.Health != pool.Healthy || draining[g.Box] {
				continue
			}
		case "used":
			if g.Allocation == "" {
				continue
			}
		case "unhealthy":
			if g.Health != pool.Unhealthy {
				continue
			}
		}
		out = append(out, m.withGPUReach(g))
	}
	return map[string]any{"gpus": out}, nil
}

// getTable serves the forwarding table; with watch=1 it long-polls until
// the version differs from the version parameter (or timeout passes).
func (m *Manager) getTable(w http.ResponseWriter, r *http.Request, _ *pool.Pool) (any, error) {
	q := r.URL.Query()
	if q.Get("watch") == "" || q.Get("watch") == "0" {
		t, _ := m.table.snapshot()
		return t, nil
	}
	vs := q.Get("version")
	if vs == "" {
		return nil, badRequest("parameter version is required with watch=1")
	}
	version, err := strconv.ParseUint(vs, 10, 64)
	if err != nil {
		return nil, badRequest(fmt.Sprintf("parameter version %q is not an unsigned integer", vs))
	}
	timeout := 30 * time.Second
	if ts := q.Get("timeout"); ts != "" {
		if timeout, err = time.ParseDuration(ts); err != nil || timeout <= 0 {
			return nil, badRequest(fmt.Sprintf("parameter timeout %q: want a positive Go duration such as 30s", ts))
		}
		timeout = min(timeout, MaxWatch)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	return m.table.wait(ctx, version), nil
}

// getEvents serves events after the since parameter (default 0: all kept),
// of one host with host=H; with watch=1 it long-polls until there is one
// or timeout passes. The answer carries "next": the since of the next call.
func (m *Manager) getEvents(w http.ResponseWriter, r *http.Request, _ *pool.Pool) (any, error) {
	q := r.URL.Query()
	var since uint64
	if s := q.Get("since"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("parameter since %q is not an unsigned integer", s))
		}
		since = v
	}
	host := q.Get("host")
	type answer struct {
		Events []Event `json:"events"`
		Next   uint64  `json:"next"`
	}
	if q.Get("watch") == "" || q.Get("watch") == "0" {
		evs, last, _ := m.events.since(since, host)
		return answer{evs, last}, nil
	}
	timeout := 30 * time.Second
	if ts := q.Get("timeout"); ts != "" {
		var err error
		if timeout, err = time.ParseDuration(ts); err != nil || timeout <= 0 {
			return nil, badRequest(fmt.Sprintf("parameter timeout %q: want a positive Go duration such as 30s", ts))
		}
		timeout = min(timeout, MaxWatch)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	evs, last := m.events.wait(ctx, since, host)
	return answer{evs, last}, nil
}
