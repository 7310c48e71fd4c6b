package table

import (
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func samplePair(id uint32) Pair {
	return Pair{
		ID:   id,
		Host: Endpoint{Port: "veth-h", MAC: net.HardwareAddr{2, 0, 0, 0, 1, 1}, IP: netip.MustParseAddr("10.0.0.1"), UDPPort: 8855},
		GPU:  Endpoint{Port: "veth-g", MAC: net.HardwareAddr{2, 0, 0, 0, 2, 1}},
	}
}

func TestJSONWritesReadableMACAndRoundTrips(t *testing.T) {
	t.Parallel()
	tbl := Table{Version: 3, Pairs: []Pair{samplePair(7)}}
	b, err := json.Marshal(tbl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"mac":"02:00:00:00:01:01"`) {
		t.Fatalf("MAC not in text form: %s", b)
	}
	var back Table
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Pairs[0].Host.MAC.String() != "02:00:00:00:01:01" || back.Pairs[0].Host.IP != tbl.Pairs[0].Host.IP {
		t.Fatalf("round trip changed the pair: %+v", back.Pairs[0])
	}
}

func TestJSONAcceptsBase64MAC(t *testing.T) {
	t.Parallel()
	var e Endpoint
	if err := json.Unmarshal([]byte(`{"port":"p","mac":"AgAAAAIB"}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.MAC.String() != "02:00:00:00:02:01" {
		t.Fatalf("mac = %s", e.MAC)
	}
	err := json.Unmarshal([]byte(`{"port":"p","mac":"zz"}`), &e)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"zz"`) {
		t.Fatalf("bad MAC error = %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := Table{Pairs: []Pair{samplePair(1), samplePair(2)}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Table){
		"id 0":        func(t *Table) { t.Pairs[0].ID = 0 },
		"id too big":  func(t *Table) { t.Pairs[0].ID = MaxPairID + 1 },
		"duplicate":   func(t *Table) { t.Pairs[1].ID = t.Pairs[0].ID },
		"no port":     func(t *Table) { t.Pairs[0].GPU.Port = "" },
		"short mac":   func(t *Table) { t.Pairs[0].Host.MAC = net.HardwareAddr{1, 2} },
		"ipv6":        func(t *Table) { t.Pairs[0].Host.IP = netip.MustParseAddr("::1") },
		"vlan":        func(t *Table) { t.Pairs[0].VLAN = 4095 },
		"drop > 100%": func(t *Table) { t.Pairs[0].DropPPM = 1_000_001 },
	}
	for name, mutate := range cases {
		tb := Table{Pairs: []Pair{samplePair(1), samplePair(2)}}
		mutate(&tb)
		if err := tb.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
}
