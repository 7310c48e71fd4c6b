package vm

import (
	"encoding/json"
	"regexp"
	"testing"
)

// TestDemoJSONKeysCarryUnits: every key of vm demo --json carries its
// unit, as dxpu help units promises (bytes and config_size did not), but
// names, checks, counts and the loss probability; pci is the guest's own
// listing.
func TestDemoJSONKeysCarryUnits(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(DemoResult{ConfigSize: 256, Bytes: 64 << 20, Loss: 0.01, Error: "x",
		Switch: &SwitchFlows{ToGPUFrames: 1, ToGPUBytes: 2, ToHostFrames: 3, ToHostBytes: 4}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	sw, _ := m["switch"].(map[string]any)
	if sw == nil {
		t.Fatalf("no switch object in %s", b)
	}
	unitless := map[string]bool{"pci": true, "gpu": true, "config_diff": true, "src_crc32c": true, "vram_crc32c": true,
		"accel": true, "machine": true, "path": true, "switch": true, "loss": true, "error": true, "link_downs": true}
	unit := regexp.MustCompile(`_(ns|us|ms|s|pct|gbps|bytes)$|_ok$|_frames$`)
	for _, keys := range []map[string]any{m, sw} {
		for k := range keys {
			if !unitless[k] && !unit.MatchString(k) {
				t.Errorf("vm demo --json: key %q carries no unit", k)
			}
		}
	}
	if m["copy_bytes"] != float64(64<<20) || m["config_bytes"] != 256.0 {
		t.Errorf("copy_bytes %v, config_bytes %v: want 67108864 and 256 in %s", m["copy_bytes"], m["config_bytes"], b)
	}
}
