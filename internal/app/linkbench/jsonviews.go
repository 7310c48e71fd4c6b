package linkbench

import (
	"encoding/json"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/internal/app/snakejson"
)

// BridgeCounters are a bridge's counters as the report writes them:
// snake_case keys, SRTT and RTO in microseconds (srtt_us, rto_us).
type BridgeCounters bridge.Counters

// MarshalJSON writes the counters with snake_case keys.
func (c BridgeCounters) MarshalJSON() ([]byte, error) { return snakejson.Marshal(bridge.Counters(c)) }

// LinkStats are one direction of the in-memory link, snake_case.
type LinkStats memlink.Stats

// MarshalJSON writes the statistics with snake_case keys.
func (s LinkStats) MarshalJSON() ([]byte, error) { return snakejson.Marshal(memlink.Stats(s)) }

// Faults are the injected faults as the report writes them: probabilities,
// delays in microseconds and the rate limit in Gbit/s.
type Faults memlink.Faults

// MarshalJSON writes the faults with snake_case keys and units.
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Loss           float64 `json:"loss"`
		Duplicate      float64 `json:"duplicate"`
		Reorder        float64 `json:"reorder"`
		ReorderDelayUs float64 `json:"reorder_delay_us,omitempty"`
		Corrupt        float64 `json:"corrupt"`
		DelayUs        float64 `json:"delay_us"`
		LinkGbps       float64 `json:"link_gbps"`
	}{f.Loss, f.Duplicate, f.Reorder, float64(f.ReorderDelay) / 1e3, f.Corrupt, float64(f.Delay) / 1e3, f.Bandwidth / 1e9})
}
