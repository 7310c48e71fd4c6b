package switching_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
)

func TestDecodeTableBothMACForms(t *testing.T) {
	want := switchtest.Table()
	b64, err := json.Marshal(want) // net.HardwareAddr marshals as base64
	if err != nil {
		t.Fatal(err)
	}
	got, err := switching.DecodeTable(b64)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pairs[1].GPU.MAC.String() != want.Pairs[1].GPU.MAC.String() || got.Pairs[1].Host.IP != want.Pairs[1].Host.IP || got.Version != want.Version {
		t.Fatalf("round trip: %+v", got.Pairs[1])
	}
	text := `{"version":3,"pairs":[{"id":7,"host":{"port":"a","mac":"02:00:00:00:00:01"},"gpu":{"port":"b","mac":"02:00:00:00:00:02","udp_port":9000}}]}`
	got, err = switching.DecodeTable([]byte(text))
	if err != nil || got.Pairs[0].Host.MAC.String() != "02:00:00:00:00:01" || got.Pairs[0].GPU.UDPPort != 9000 {
		t.Fatalf("text MACs: %v %+v", err, got)
	}
}

func TestDecodeTableErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"pairs":[{"id":1,"host":{"port":"a","mac":"zz"},"gpu":{"port":"b","mac":"02:00:00:00:00:02"}}]}`, "pairs[0].host.mac"},
		{`{"pairs":[{"id":1,"host":{"port":"a","mac":5},"gpu":{"port":"b","mac":"02:00:00:00:00:02"}}]}`, "pairs[0].host.mac"},
		{`{"pairs":[{"id":0,"host":{"port":"a","mac":"02:00:00:00:00:01"},"gpu":{"port":"b","mac":"02:00:00:00:00:02"}}]}`, "pairs[0].id"},
		{`{"pairs":`, "table JSON"},
	} {
		_, err := switching.DecodeTable([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.in, err, tc.want)
		}
	}
	_, err := switching.DecodeTable([]byte(`{"pairs":[{"id":16777216,"host":{"port":"a","mac":"02:00:00:00:00:01"},"gpu":{"port":"b","mac":"02:00:00:00:00:02"}}]}`))
	if !errors.Is(err, table.ErrInvalid) {
		t.Errorf("24-bit overflow: %v", err)
	}
}

// FuzzDecodeTable: never panics; whatever it accepts is valid and survives
// a round trip through json.Marshal (base64 MACs).
func FuzzDecodeTable(f *testing.F) {
	b, _ := json.Marshal(switchtest.Table())
	f.Add(b)
	f.Add([]byte(`{"version":3,"pairs":[{"id":7,"host":{"port":"a","mac":"02:00:00:00:00:01"},"gpu":{"port":"b","mac":"02:00:00:00:00:02"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := switching.DecodeTable(data)
		if err != nil {
			return
		}
		if err := tb.Validate(); err != nil {
			t.Fatalf("accepted an invalid table: %v", err)
		}
		again, err := json.Marshal(tb)
		if err != nil {
			t.Fatal(err)
		}
		tb2, err := switching.DecodeTable(again)
		if err != nil || len(tb2.Pairs) != len(tb.Pairs) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestTableHelpers: PortNames, SyntheticPorts and IngressByMAC.
func TestTableHelpers(t *testing.T) {
	tb := switchtest.Table()
	if got := switching.PortNames(tb); !slices.Equal(got, []string{switchtest.P1, switchtest.P2, switchtest.P3}) {
		t.Errorf("PortNames = %v", got)
	}
	sp := switching.SyntheticPorts([]string{"a", "b"})
	if sp["a"].Index != 1 || sp["b"].Index != 2 || sp["a"].Name != "a" ||
		sp["a"].MAC.String() != "02:5e:00:00:00:01" || sp["b"].MAC.String() != "02:5e:00:00:00:02" {
		t.Errorf("SyntheticPorts = %+v", sp)
	}
	by := switching.IngressByMAC(tb)
	for _, p := range tb.Pairs {
		if by[[6]byte(p.Host.MAC)] != p.Host.Port || by[[6]byte(p.GPU.MAC)] != p.GPU.Port {
			t.Errorf("IngressByMAC: pair %#x host %s -> %q, GPU %s -> %q", p.ID, p.Host.MAC, by[[6]byte(p.Host.MAC)], p.GPU.MAC, by[[6]byte(p.GPU.MAC)])
		}
	}
	if len(by) != 2*len(tb.Pairs) {
		t.Errorf("IngressByMAC has %d MACs, want %d", len(by), 2*len(tb.Pairs))
	}
}
