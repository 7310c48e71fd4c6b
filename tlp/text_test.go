package tlp

import (
	"encoding/json"
	"testing"
)

func TestKindAndIDText(t *testing.T) {
	t.Parallel()
	type cfg struct {
		K  Kind `json:"k"`
		ID ID   `json:"id"`
	}
	b, err := json.Marshal(cfg{CplDLk, NewID(0x3a, 0x1f, 6)})
	if err != nil || string(b) != `{"k":"CplDLk","id":"3a:1f.6"}` {
		t.Fatalf("%s %v", b, err)
	}
	var c cfg
	if err := json.Unmarshal(b, &c); err != nil || c.K != CplDLk || c.ID != NewID(0x3a, 0x1f, 6) {
		t.Fatalf("%+v %v", c, err)
	}
	if err := json.Unmarshal([]byte(`{"k":"MRead"}`), &c); err == nil {
		t.Error("unknown kind accepted")
	}
	if err := json.Unmarshal([]byte(`{"id":"00:20.0"}`), &c); err == nil {
		t.Error("device 0x20 accepted")
	}
	for k := MRd; k < kindCount; k++ {
		if got, ok := ParseKind(k.String()); !ok || got != k {
			t.Errorf("ParseKind(%s) = %v", k, got)
		}
	}
}
