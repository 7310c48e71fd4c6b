package bridgeagent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
)

// Status is what GET /agent/v1/status answers.
type Status struct {
	Role      string       `json:"role"`
	DataPlane string       `json:"data_plane"`
	Pairs     []PairStatus `json:"pairs"`
	// Slots (host role): the downstream ports that have held a GPU.
	Slots []Slot `json:"slots,omitempty"`
	// Guest (host role with --vm): the QEMU guest that is the host.
	Guest *GuestStatus `json:"guest,omitempty"`
	// Frames the data-plane socket dropped before any bridge saw them.
	FramesUnknownPair uint64 `json:"frames_unknown_pair"`
	FramesMalformed   uint64 `json:"frames_malformed"`
	FramesOverflow    uint64 `json:"frames_overflow"`
}

// PairStatus is one programmed pair.
type PairStatus struct {
	ID            uint32 `json:"id"`
	Allocation    string `json:"allocation"`
	Host          string `json:"host"`
	HostPort      int    `json:"host_port"`
	GPU           string `json:"gpu"`
	Link          string `json:"link"` // init, up, down
	TLPsSent      uint64 `json:"tlps_sent"`
	TLPsReceived  uint64 `json:"tlps_received"`
	FramesDropped uint64 `json:"frames_dropped"`
	// The sizes the pair's bridge runs at (--mtu, --max-payload) and the
	// largest payload its peer announced (0 before it answered): ends
	// that disagree show here.
	MTU            int `json:"mtu_bytes"`
	MaxPayload     int `json:"max_payload_bytes"`
	PeerMaxPayload int `json:"peer_max_payload_bytes"`
	// KeyGeneration is the pair key generation this side was last
	// programmed with (and seals under): both ends of a live pair must
	// agree, which dxpu chaos checks.
	KeyGeneration uint32 `json:"key_generation"`
	// KeyFingerprint names the key in use (KeyFingerprint), never the key:
	// one generation of a pair must always name one key, which dxpu chaos
	// checks across both ends and restarts.
	KeyFingerprint string `json:"key_fingerprint"`
	// KeysRefused counts the keys the manager sent this pair that its
	// bridge refused (a generation not newer than one it holds) since the
	// pair was programmed here; LastKeyRefused is the last one, why.
	KeysRefused    uint64 `json:"keys_refused"`
	LastKeyRefused string `json:"last_key_refused,omitempty"`
	// FramesUnknownGeneration: frames sealed under a generation this side
	// does not hold (the two ends were given different keys).
	FramesUnknownGeneration uint64 `json:"frames_unknown_generation"`
}

// Status reports the pairs, their links and (host role) the slots.
func (a *Agent) Status() Status {
	st := Status{Role: a.o.Role.String(), DataPlane: a.mux.LocalAddr().String(), Pairs: []PairStatus{},
		FramesUnknownPair: a.mux.Unknown.Load(), FramesMalformed: a.mux.Malformed.Load(), FramesOverflow: a.mux.Overflow.Load()}
	a.mu.Lock()
	for _, pr := range a.pairs {
		c := pr.runner.Counters()
		st.Pairs = append(st.Pairs, PairStatus{ID: pr.p.ID, Allocation: pr.p.Allocation, Host: pr.p.Host, HostPort: pr.p.HostPort,
			GPU: pr.p.GPU, Link: pr.runner.State().String(), TLPsSent: c.TLPsSent, TLPsReceived: c.TLPsReceived, FramesDropped: c.FramesDropped,
			MTU: pr.sizes.MTU, MaxPayload: pr.sizes.MaxPayload, PeerMaxPayload: pr.runner.PeerMaxPayload(),
			KeyGeneration: pr.p.Key.Generation, KeyFingerprint: KeyFingerprint(pr.p.Key), KeysRefused: pr.keysRefused,
			LastKeyRefused: pr.keyRefusal, FramesUnknownGeneration: c.DroppedUnknownGeneration})
	}
	a.mu.Unlock()
	if v, ok := a.host.(*vmHost); ok {
		g := v.guest()
		st.Guest = &g
	}
	if a.host != nil {
		for _, s := range a.host.Slots() {
			if s.Pair != 0 {
				st.Slots = append(st.Slots, s)
			}
		}
	}
	return st
}

// KeyFingerprint is the first 8 bytes, in hex, of SHA-256 over a label and
// the key: enough to tell two keys of one generation apart, and, the key
// being 256 random bits, nothing about the key itself.
func KeyFingerprint(k manager.PairKey) string {
	h := sha256.New()
	h.Write([]byte("dxpu pair key fingerprint\x00"))
	h.Write(k.Key[:])
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// gpuLister is a GPU box's agent as the agent API sees it: pairs and
// their listing, no hot-plug routes.
type gpuLister struct{ a *Agent }

func (g gpuLister) ProgramPair(ctx context.Context, p manager.Pair) error {
	return g.a.ProgramPair(ctx, p)
}
func (g gpuLister) RemovePair(ctx context.Context, p manager.Pair) error {
	return g.a.RemovePair(ctx, p)
}
func (g gpuLister) ListPairs(ctx context.Context) ([]manager.Pair, error) { return g.a.ListPairs(ctx) }

// Handler serves the agent API (package agentapi: the manager's saga
// steps and pair listing) and GET /agent/v1/status, all behind the
// agent's credential.
func (a *Agent) Handler() http.Handler {
	var impl agentapi.PairProgrammer = a
	if a.o.Role == bridge.RoleGPU {
		impl = gpuLister{a}
	}
	api := agentapi.NewServer(impl)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agent/v1/status", func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if want := a.credential(); !ok || want == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unauthorized",
				"message": "the status needs this agent's credential (Authorization: Bearer ...)"}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.Status())
	})
	if a.o.Role == bridge.RoleHost {
		mux.HandleFunc("POST /agent/v1/pairs/{id}/copy-check", a.serveCopyCheck)
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.SetCredential(a.credential()) // follows SetCredential
		api.ServeHTTP(w, r)
	}))
	return mux
}
