package manager

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/pool"
)

// Agent reports. A bridge's agent tells the manager what only it can see,
// with its own credential (never the admin token):
//
//	POST /v1/agent/pairs/{id}/link-down   {"reason":"peer silent for 1s"}
//	POST /v1/agent/pairs/{id}/link-up     {}
//	Authorization: Bearer <the agent's credential>
//
//	200 {"pair":41,"gpu":"box7-g0","allocation":"a-3f9c0b6e21d4","state":"active"}
//
// Either end's agent reports its pair's link down (its peer fell silent)
// and up again: the allocation is degraded while the link stays down past
// Config.DegradedAfter, active again when it is up (linkstate.go). A
// link-down never fails the GPU: neither end can tell a dead GPU from a
// silent fabric, a paused peer or a box restarting, and a healthy GPU
// taken away is an outage the control plane made. GPU health comes only
// from evidence about the GPU itself: its box re-registering it unhealthy
// (RegisterBox) or an operator (POST /v1/gpus/{id}/health). A credential
// that is no agent's is 401; an agent that holds neither end of the pair
// 403; a pair that no allocation holds (already torn down: the report is
// done) 404.

// agentOf returns the box or host whose agent credential tok is, comparing
// with every credential in constant time.
func (m *Manager) agentOf(tok string) (bridgeID, bool) {
	m.creds.mu.RLock()
	defer m.creds.mu.RUnlock()
	var who bridgeID
	found := false
	for id, ac := range m.creds.by {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(ac.Credential)) == 1 {
			who, found = id, true
		}
	}
	return who, found
}

// agentPair authenticates an agent report on the path's pair and finds
// the pair's allocation; on failure it has answered.
func (m *Manager) agentPair(w http.ResponseWriter, r *http.Request) (who bridgeID, alloc pool.Allocation, as pool.Assignment, reason string, ok bool) {
	tok, has := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	who, known := m.agentOf(strings.TrimSpace(tok))
	if !has || !known {
		m.metrics.unauthorized.Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="dxpu-agent-report"`)
		writeError(w, &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "agent reports need the reporting agent's own credential (Authorization: Bearer ...)"})
		return
	}
	p, err := m.livePool()
	if err != nil {
		writeError(w, apiErrorOf(err))
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
	if err != nil || id == 0 || id > 1<<24-1 {
		writeError(w, badRequest(fmt.Sprintf("path pair id %q: want 1..16777215", oneline.Cut(r.PathValue("id"), maxEcho))))
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := decode(r, &body); err != nil {
		writeError(w, apiErrorOf(err))
		return
	}
	found := false
	for _, a := range p.Allocations() {
		for _, g := range a.GPUs {
			if g.Pair == uint32(id) {
				alloc, as, found = a, g, true
			}
		}
	}
	if !found {
		writeError(w, &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("pair %d is in no allocation", id)})
		return
	}
	if who != (bridgeID{BridgeHost, alloc.Host}) && who != (bridgeID{BridgeBox, as.Box}) {
		writeError(w, &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: fmt.Sprintf("the agent of %s %s holds neither end of pair %d (host %s, box %s)", who.kind, who.id, id, alloc.Host, as.Box)})
		return
	}
	return who, alloc, as, body.Reason, true
}

// agentLinkDown serves POST /v1/agent/pairs/{id}/link-down: from either
// end's agent the pair is down (linkstate.go), the GPU stays lent.
func (m *Manager) agentLinkDown(w http.ResponseWriter, r *http.Request) {
	who, alloc, as, reason, ok := m.agentPair(w, r)
	if !ok {
		return
	}
	m.log.Warn("agent reports pair link down", "agent", who.kind+"/"+who.id, "pair", as.Pair, "gpu", as.GPU,
		"allocation", alloc.ID, "reason", reason, "degraded_after", m.cfg.DegradedAfter)
	m.pairLinkDown(alloc, as, who.kind+" "+who.id, reason)
	writeLinkReport(w, as, alloc.ID, m.withLinkState(alloc).State)
}

// agentLinkUp serves POST /v1/agent/pairs/{id}/link-up.
func (m *Manager) agentLinkUp(w http.ResponseWriter, r *http.Request) {
	who, alloc, as, _, ok := m.agentPair(w, r)
	if !ok {
		return
	}
	writeLinkReport(w, as, alloc.ID, m.pairLinkUp(alloc, as, who.kind+" "+who.id))
}

func writeLinkReport(w http.ResponseWriter, as pool.Assignment, alloc string, state pool.State) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"pair": as.Pair, "gpu": as.GPU, "allocation": alloc, "state": state})
}
