package snakejson

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
)

func TestKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"FramesSent": "frames_sent", "SRTT": "srtt", "RTO": "rto", "TLPsSent": "tlps_sent", "RTOs": "rtos",
		"PayloadBytesRx": "payload_bytes_rx", "AcksSent": "acks_sent", "SynthesizedUR": "synthesized_ur",
		"TagsHighWater": "tags_high_water", "CreditStalls": "credit_stalls", "QueueDrops": "queue_drops", "Lost": "lost",
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMarshalCounters: the bridge's counters come out snake_case, with
// durations in microseconds under _us keys, and no Go field name left.
func TestMarshalCounters(t *testing.T) {
	t.Parallel()
	b, err := Marshal(bridge.Counters{FramesSent: 3, TLPsSent: 2, SRTT: 12500 * time.Nanosecond, RTO: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["frames_sent"] != 3.0 || m["tlps_sent"] != 2.0 || m["srtt_us"] != 12.5 || m["rto_us"] != 1000.0 {
		t.Errorf("%s", b)
	}
	for k := range m {
		if Key(k) != k {
			t.Errorf("key %q is not snake_case", k)
		}
	}
	if _, err := Marshal(3); err == nil {
		t.Error("Marshal(3) accepted")
	}
}
