package manager

import (
	"context"
	"errors"

	"github.com/dxpu/dxpu/fabric/pool"
)

// Pair is everything an agent needs to program one host-GPU pair.
type Pair struct {
	ID         uint32        `json:"id"` // 24-bit pair ID carried by every frame
	Allocation string        `json:"allocation"`
	Host       string        `json:"host"`
	HostPort   int           `json:"host_port"` // virtual downstream port on the host bridge
	HostBridge pool.Endpoint `json:"host_bridge"`
	Box        string        `json:"box"`
	GPU        string        `json:"gpu"`
	GPUBridge  pool.Endpoint `json:"gpu_bridge"`
	BDF        string        `json:"bdf"`                  // the GPU's BDF inside its box
	HostAgent  string        `json:"host_agent,omitempty"` // agent API URL of the host bridge
	GPUAgent   string        `json:"gpu_agent,omitempty"`  // agent API URL of the box bridge
	// The credentials the manager issued to those agents: each is sent to
	// its own agent only and never as part of a pair's JSON.
	HostAgentCredential string `json:"-"`
	GPUAgentCredential  string `json:"-"`
	Model               string `json:"model"`
	MemoryMiB           uint64 `json:"memory_mib"`
	// Key is the pair's key (see PairKey): sent to the two agents only,
	// never part of a pair's JSON.
	Key PairKey `json:"-"`
	// HeldGeneration is, in an agent's listing only, the newest key
	// generation the agent holds for the pair (never the key): the
	// manager issues the pair's next key above it (KEY-9), also when its
	// store lost the counter or an older manager numbered keys otherwise.
	HeldGeneration uint32 `json:"held_generation,omitempty"`
}

// GPUBridgeProgrammer programs the GPU-side bridge of a box: which pair ID
// maps to which local GPU and which host it may talk to. Both calls are
// idempotent: programming a programmed pair, or removing an absent one,
// succeeds.
type GPUBridgeProgrammer interface {
	ProgramPair(ctx context.Context, p Pair) error
	RemovePair(ctx context.Context, p Pair) error
}

// SwitchProgrammer programs the fabric switch for a pair. The manager also
// keeps the versioned forwarding table (GET /v1/table) that `dxpu switch`
// follows, so this is needed only for switches driven directly (in-process
// emulation). Idempotent like GPUBridgeProgrammer.
type SwitchProgrammer interface {
	ProgramPair(ctx context.Context, p Pair) error
	RemovePair(ctx context.Context, p Pair) error
}

// HostBridgeProgrammer programs the host-side bridge: the pair behind a
// virtual downstream port, then the hot-plug events the host's OS sees.
// All calls are idempotent.
type HostBridgeProgrammer interface {
	ProgramPair(ctx context.Context, p Pair) error
	RemovePair(ctx context.Context, p Pair) error
	// HotAdd presents the GPU on the pair's virtual port (presence detect,
	// link up) so the host enumerates it.
	HotAdd(ctx context.Context, p Pair) error
	// HotRemove is an orderly removal (attention button, then power off).
	HotRemove(ctx context.Context, p Pair) error
	// SurpriseRemove tells the host that the GPU is gone (link down
	// without warning), as when the GPU fails.
	SurpriseRemove(ctx context.Context, p Pair) error
}

// PairLister is implemented by agents that can report what they actually
// hold; reconciliation then removes pairs the manager does not know and
// re-programs pairs the agent lost.
type PairLister interface {
	ListPairs(ctx context.Context) ([]Pair, error)
}

// AgentPairLister is implemented by programmers that reach one agent per
// bridge (package agentapi): the reconciler asks every agent URL that a
// box or host of the pool registered, with the credential issued to that
// agent. An agent that cannot list answers ErrCannotList (wrapped) and is
// left alone.
type AgentPairLister interface {
	ListPairsAt(ctx context.Context, agentURL, credential string) ([]Pair, error)
}

// ErrCannotList is returned by an AgentPairLister for an agent without a
// pair listing.
var ErrCannotList = errors.New("agent cannot list its pairs")

// Noop is a programmer that does nothing, for a manager that only publishes
// its forwarding table.
type Noop struct{}

func (Noop) ProgramPair(context.Context, Pair) error    { return nil }
func (Noop) RemovePair(context.Context, Pair) error     { return nil }
func (Noop) HotAdd(context.Context, Pair) error         { return nil }
func (Noop) HotRemove(context.Context, Pair) error      { return nil }
func (Noop) SurpriseRemove(context.Context, Pair) error { return nil }
