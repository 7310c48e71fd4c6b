package guest

import (
	"encoding/json"
	"testing"
)

// TestReportKeysCarryUnits: the report's sizes and run time carry their
// unit in their keys, as dxpu help units says (config_bytes, copy_bytes,
// duration_s; not config_size, bytes, seconds), and read back.
func TestReportKeysCarryUnits(t *testing.T) {
	t.Parallel()
	rep := Report{GPU: "0000:01:00.0", ConfigSize: 256, Bytes: 64 << 20, Seconds: 1.5}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["config_bytes"] != 256.0 || m["copy_bytes"] != float64(64<<20) || m["duration_s"] != 1.5 {
		t.Errorf("config_bytes %v, copy_bytes %v, duration_s %v: want 256, 67108864 and 1.5 in %s", m["config_bytes"], m["copy_bytes"], m["duration_s"], b)
	}
	for _, old := range []string{"config_size", "bytes", "seconds"} {
		if _, ok := m[old]; ok {
			t.Errorf("the report still has the unitless key %q: %s", old, b)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.ConfigSize != rep.ConfigSize || back.Bytes != rep.Bytes || back.Seconds != rep.Seconds {
		t.Errorf("read back %+v (%v), want %+v", back, err, rep)
	}
}
