package table

import (
	"encoding/base64"
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

// The top of every range Validate checks is itself valid: pair ID 2^24-1,
// VLAN 4094 and a drop rate of one million per million. A bound checked
// with >= where > is meant fails it.
func TestValidateAcceptsRangeTops(t *testing.T) {
	t.Parallel()
	tb := Table{Pairs: []Pair{samplePair(MaxPairID), samplePair(1)}}
	tb.Pairs[0].VLAN = 4094
	tb.Pairs[0].DropPPM = 1_000_000
	if err := tb.Validate(); err != nil {
		t.Fatalf("Validate(id %d, vlan 4094, drop_ppm 1000000) = %v, want nil", MaxPairID, err)
	}
}

// A MAC must be exactly 6 bytes: EUI-64 (8) and InfiniBand (20) addresses,
// which net.ParseMAC accepts, are refused; so are IPv4-mapped IPv6 addresses.
func TestValidateRejectsLongMACAndMappedIPv6(t *testing.T) {
	t.Parallel()
	cases := map[string]func(*Table){
		"eui-64 mac":      func(t *Table) { t.Pairs[0].GPU.MAC = net.HardwareAddr{2, 0, 0, 0, 0, 0, 0, 1} },
		"7-byte mac":      func(t *Table) { t.Pairs[1].Host.MAC = net.HardwareAddr{2, 0, 0, 0, 0, 0, 1} },
		"ipv4-mapped ip6": func(t *Table) { t.Pairs[0].Host.IP = netip.MustParseAddr("::ffff:10.0.0.1") },
	}
	for name, mutate := range cases {
		tb := Table{Pairs: []Pair{samplePair(1), samplePair(2)}}
		mutate(&tb)
		if err := tb.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
}

// Sorted orders by ascending ID and leaves the table's own slice alone: a
// Sorted that sorted in place, or returned the table's backing array,
// fails it.
func TestSortedAscendingCopy(t *testing.T) {
	t.Parallel()
	tb := Table{Pairs: []Pair{samplePair(30), samplePair(2), samplePair(17), samplePair(5)}}
	got := tb.Sorted()
	var ids []uint32
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	if want := []uint32{2, 5, 17, 30}; len(ids) != len(want) || ids[0] != 2 || ids[1] != 5 || ids[2] != 17 || ids[3] != 30 {
		t.Fatalf("Sorted IDs = %v, want %v", ids, want)
	}
	if tb.Pairs[0].ID != 30 || tb.Pairs[1].ID != 2 || tb.Pairs[2].ID != 17 || tb.Pairs[3].ID != 5 {
		t.Fatalf("Sorted reordered the table itself: %v", tb.Pairs)
	}
	got[0].ID = 999
	if tb.Pairs[1].ID != 2 {
		t.Fatal("Sorted returned the table's own backing array")
	}
}

// The base64 form (earlier versions) must also be exactly 6 bytes.
func TestJSONBase64MACMustBeSixBytes(t *testing.T) {
	t.Parallel()
	for _, raw := range [][]byte{{2, 0, 0, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 0, 1}, {2, 0, 0}} {
		b64 := base64.StdEncoding.EncodeToString(raw)
		var e Endpoint
		err := json.Unmarshal([]byte(`{"port":"p","mac":"`+b64+`"}`), &e)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("base64 MAC of %d bytes (%s): err = %v, mac = %v; want ErrInvalid", len(raw), b64, err, e.MAC)
		}
	}
}

// Every field survives a round trip, the UDP port included, and an endpoint
// without a MAC (written as "") reads back as one without a MAC.
func TestJSONRoundTripsUDPPortAndNoMAC(t *testing.T) {
	t.Parallel()
	in := Endpoint{Port: "veth-h", MAC: net.HardwareAddr{2, 0, 0, 0, 1, 1}, IP: netip.MustParseAddr("10.0.0.1"), UDPPort: 8855}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"udp_port":8855`) {
		t.Fatalf("udp_port not written: %s", b)
	}
	var back Endpoint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Port != in.Port || back.MAC.String() != in.MAC.String() || back.IP != in.IP || back.UDPPort != in.UDPPort {
		t.Fatalf("round trip = %+v, want %+v", back, in)
	}

	b, err = json.Marshal(Endpoint{Port: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var none Endpoint
	if err := json.Unmarshal(b, &none); err != nil {
		t.Fatalf("Unmarshal(%s) = %v, want nil", b, err)
	}
	if none.Port != "p" || len(none.MAC) != 0 {
		t.Fatalf("endpoint without MAC read back as %+v", none)
	}
}
