package model

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRTTBounds: an RTT beyond MaxRTT is refused (ErrRTTRange), as a
// duration or a bare number of microseconds, in --sweep lists and in
// profiles, and messages write microseconds as us, never µs.
func TestRTTBounds(t *testing.T) {
	t.Parallel()
	if d, err := ParseRTT("1s"); err != nil || d != MaxRTT {
		t.Errorf("ParseRTT(1s) = %v, %v", d, err)
	}
	for _, bad := range []string{"1000h", "1.5s", "1000001", "-5us", "-3"} {
		_, err := ParseRTT(bad)
		if !errors.Is(err, ErrRTTRange) {
			t.Errorf("ParseRTT(%q) = %v, want ErrRTTRange", bad, err)
		} else if strings.Contains(err.Error(), "µ") {
			t.Errorf("ParseRTT(%q): %v spells µs", bad, err)
		}
	}
	if _, err := ParseRTT("-5us"); err == nil || !strings.Contains(err.Error(), "-5us") {
		t.Errorf("ParseRTT(-5us): %v, want the value written -5us", err)
	}
	if err := (Fabric{RTT: -5 * us, Tags: 1, MRRS: 512}).Validate(); err == nil || !strings.Contains(err.Error(), "-5us") {
		t.Errorf("Validate: %v, want -5us", err)
	}
	for _, in := range []string{`{"rtt_us": 2e6}`, `{"mmio_read_us": {"native": 1, "fabric": 2e6}}`} {
		if _, err := FabricFromProfile(strings.NewReader(in), Native); !errors.Is(err, ErrRTTRange) {
			t.Errorf("%s: %v, want ErrRTTRange", in, err)
		}
	}
	if _, err := FabricFromProfile(strings.NewReader(`{"rtt_us": 5, "link_gbps": 1e6}`), Native); err == nil {
		t.Error("a profile of 10^6 Gbit/s accepted")
	}
}

// TestMRRSKeyCarriesItsUnit: the fabric's JSON writes mrrs_bytes, and a
// profile says mrrs_bytes (bench fabric now) or mrrs (bench fabric before).
func TestMRRSKeyCarriesItsUnit(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Fabric{RTT: time.Microsecond, Tags: 256, MRRS: 1024})
	if err != nil || !strings.Contains(string(b), `"mrrs_bytes":1024`) || strings.Contains(string(b), `"mrrs":`) {
		t.Errorf("Fabric JSON %s (%v)", b, err)
	}
	for _, in := range []string{`{"rtt_us": 5, "mrrs_bytes": 1024}`, `{"rtt_us": 5, "mrrs": 1024}`} {
		if f, err := FabricFromProfile(strings.NewReader(in), Native); err != nil || f.MRRS != 1024 {
			t.Errorf("%s: MRRS %d, %v", in, f.MRRS, err)
		}
	}
}

// TestBandwidthKilobits: kbit rates, which bench link's --bw took, parse.
func TestBandwidthKilobits(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"100K": 12.5e3, "100kbit": 12.5e3, "8kbps": 1e3} {
		if got, err := ParseBandwidth(in); err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
