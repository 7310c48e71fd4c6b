package pool

import "time"

// Event is one entry of the manager's GET /v1/events: something that
// happened to the pool (an allocation made or released, a GPU failed, ...;
// the types are the manager's Event* constants). Here, not in the manager,
// so that the control client decodes it without the manager's dependencies.
type Event struct {
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Type       string    `json:"type"`
	Allocation string    `json:"allocation,omitempty"`
	Host       string    `json:"host,omitempty"`
	Box        string    `json:"box,omitempty"`
	GPUs       []string  `json:"gpus,omitempty"`
	Pair       uint32    `json:"pair,omitempty"`
	HostPort   *int      `json:"host_port,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	// Healthy says, in a gpu_health event, whether the GPU became healthy
	// (true) or unhealthy (false); absent from the other types.
	Healthy *bool `json:"healthy,omitempty"`
}
