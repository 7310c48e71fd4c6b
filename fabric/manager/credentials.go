package manager

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"sync"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// Agent credentials. A bridge that registers with an agent_url gets its own
// credential: 256 random bits, issued by the manager, bound to that URL,
// stored beside the bridge (cred/box/<id>, cred/host/<id>) and answered only
// to the registering caller (who holds the admin token) as
// "agent_credential". The manager calls that agent with that credential and
// nothing else; the admin token never leaves the manager. Re-registering
// with the same agent_url keeps the credential (a restarted bridge can ask
// for it again); a new agent_url, or a bridge without one, drops it.

// Bridge kinds, as in the store keys and error messages.
const (
	BridgeBox  = "box"
	BridgeHost = "host"
)

// agentCred is the stored form of one credential.
type agentCred struct {
	AgentURL   string `json:"agent_url"`
	Credential string `json:"credential"`
}

// bridgeID names a box or a host; a struct key, so that looking up the
// credentials of every pair of a saga allocates nothing.
type bridgeID struct{ kind, id string }

type credentials struct {
	mu sync.RWMutex
	by map[bridgeID]agentCred
}

func credKey(kind, id string) string { return keyCred + kind + "/" + id }

// bridgeOfKey parses a store key cred/<kind>/<id>.
func bridgeOfKey(key string) (bridgeID, bool) {
	rest, ok := strings.CutPrefix(key, keyCred)
	if !ok {
		return bridgeID{}, false
	}
	kind, id, ok := strings.Cut(rest, "/")
	if !ok || (kind != BridgeBox && kind != BridgeHost) || id == "" {
		return bridgeID{}, false
	}
	return bridgeID{kind, id}, true
}

func (c *credentials) get(kind, id string) (agentCred, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ac, ok := c.by[bridgeID{kind, id}]
	return ac, ok
}

func (c *credentials) set(kind, id string, ac agentCred, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.by[bridgeID{kind, id}] = ac
	} else {
		delete(c.by, bridgeID{kind, id})
	}
}

// replace sets every credential (as loaded from the store).
func (c *credentials) replace(by map[bridgeID]agentCred) {
	c.mu.Lock()
	c.by = by
	c.mu.Unlock()
}

// decodeCred reads one stored credential.
func decodeCred(kv store.KV) (agentCred, error) {
	var ac agentCred
	if err := json.Unmarshal(kv.Value, &ac); err != nil {
		return agentCred{}, err
	}
	if ac.Credential == "" || ac.AgentURL == "" {
		return agentCred{}, fmt.Errorf("agent credential %s lacks its credential or agent_url", kv.Key)
	}
	return ac, nil
}

// AgentCredential returns the credential the manager issued to the agent of
// a registered box or host (kind BridgeBox or BridgeHost), for in-process
// callers; over HTTP it comes with the registration.
func (m *Manager) AgentCredential(kind, id string) (string, bool) {
	ac, ok := m.creds.get(kind, id)
	return ac.Credential, ok
}

// checkAgentBridge refuses a bridge with an agent_url but no bridge.ip
// (or 0.0.0.0):
// its agent (dxpu bridge agent) speaks UDP only, so the switch reaches
// it at bridge.ip:udp_port (8855 when udp_port is left out), and a table
// pair without the IP made a UDP switch drop the pair's traffic.
func checkAgentBridge(agentURL string, e pool.Endpoint) error {
	if agentURL == "" {
		return nil
	}
	if e.IP == "" {
		return fmt.Errorf("%w: bridge.ip is required with agent_url: dxpu bridge agent speaks UDP, at bridge.ip:udp_port (udp_port 8855 when left out)", pool.ErrInvalid)
	}
	if a, err := netip.ParseAddr(e.IP); err == nil && a.IsUnspecified() {
		return fmt.Errorf("%w: bridge.ip %s: want the address dxpu bridge agent receives frames on (bridge.ip:udp_port)", pool.ErrInvalid, e.IP)
	}
	return nil
}

// checkAgentURL refuses an agent reached over plain http unless the lab
// option allows it: the agent's credential would cross the network in clear.
func (m *Manager) checkAgentURL(agentURL string) error {
	if agentURL == "" || m.cfg.AllowInsecureAgents {
		return nil
	}
	u, err := url.Parse(agentURL)
	if err != nil || u.Scheme != "https" {
		return fmt.Errorf("%w: agent_url %q: agents are reached over https only (the manager runs without --allow-insecure-agents)", pool.ErrInvalid, agentURL)
	}
	return nil
}

// credFor decides the credential of a bridge being registered with
// agentURL: the one it has if the URL is the same, else a fresh one (none
// without a URL). It returns the store op that records the decision.
func (m *Manager) credFor(kind, id, agentURL string) (agentCred, bool, store.Op, error) {
	if agentURL == "" {
		return agentCred{}, false, store.Delete(credKey(kind, id)), nil
	}
	if ac, ok := m.creds.get(kind, id); ok && ac.AgentURL == agentURL {
		return ac, true, putJSON(credKey(kind, id), ac), nil
	}
	tok, err := NewToken()
	if err != nil {
		return agentCred{}, false, store.Op{}, err
	}
	ac := agentCred{AgentURL: agentURL, Credential: tok}
	return ac, true, putJSON(credKey(kind, id), ac), nil
}

// withCredentials fills in the credentials of the pairs' agents.
func (m *Manager) withCredentials(pairs []Pair) []Pair {
	for i := range pairs {
		if ac, ok := m.creds.get(BridgeBox, pairs[i].Box); ok && ac.AgentURL == pairs[i].GPUAgent {
			pairs[i].GPUAgentCredential = ac.Credential
		}
		if ac, ok := m.creds.get(BridgeHost, pairs[i].Host); ok && ac.AgentURL == pairs[i].HostAgent {
			pairs[i].HostAgentCredential = ac.Credential
		}
	}
	return pairs
}
