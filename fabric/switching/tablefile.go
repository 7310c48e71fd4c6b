package switching

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"

	"github.com/dxpu/dxpu/fabric/table"
)

// jsonEndpoint mirrors table.Endpoint with the MAC left raw: files written
// by hand say "02:00:00:00:00:01", json.Marshal of a table.Table writes
// net.HardwareAddr as base64. DecodeTable accepts both.
type jsonEndpoint struct {
	Port    string          `json:"port"`
	MAC     json.RawMessage `json:"mac"`
	IP      netip.Addr      `json:"ip,omitzero"`
	UDPPort uint16          `json:"udp_port,omitempty"`
}

type jsonPair struct {
	ID      uint32       `json:"id"`
	Host    jsonEndpoint `json:"host"`
	GPU     jsonEndpoint `json:"gpu"`
	VLAN    uint16       `json:"vlan,omitempty"`
	DropPPM uint32       `json:"drop_ppm,omitempty"`
}

type jsonTable struct {
	Version uint64     `json:"version"`
	Pairs   []jsonPair `json:"pairs"`
}

// TableFileForm says what a table file holds, for error messages.
const TableFileForm = `an object with fields version, pairs (pairs[].id, pairs[].host.port, pairs[].host.mac, pairs[].gpu.port, pairs[].gpu.mac, ...)`

// DecodeTable parses a table in JSON (as the manager serves it or as
// written by hand) and validates it.
func DecodeTable(data []byte) (*table.Table, error) {
	var jt jsonTable
	if err := json.Unmarshal(data, &jt); err != nil {
		return nil, fmt.Errorf("switch: table JSON: %w", err)
	}
	t := &table.Table{Version: jt.Version, Pairs: make([]table.Pair, 0, len(jt.Pairs))}
	for i, p := range jt.Pairs {
		tp := table.Pair{ID: p.ID, VLAN: p.VLAN, DropPPM: p.DropPPM}
		for side, e := range map[string]*jsonEndpoint{"host": &p.Host, "gpu": &p.GPU} {
			mac, err := decodeMAC(e.MAC)
			if err != nil {
				return nil, fmt.Errorf("switch: table pairs[%d].%s.mac: %w", i, side, err)
			}
			ep := table.Endpoint{Port: e.Port, MAC: mac, IP: e.IP, UDPPort: e.UDPPort}
			if side == "host" {
				tp.Host = ep
			} else {
				tp.GPU = ep
			}
		}
		t.Pairs = append(t.Pairs, tp)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeMAC(raw json.RawMessage) (net.HardwareAddr, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("want a string, got %s", raw)
	}
	if mac, err := net.ParseMAC(s); err == nil {
		return mac, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 6 {
		return nil, fmt.Errorf("%q is neither aa:bb:cc:dd:ee:ff nor a base64 6-byte address", s)
	}
	return net.HardwareAddr(b), nil
}

// LoadTable reads a table file.
func LoadTable(path string) (*table.Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("switch: %w", err)
	}
	t, err := DecodeTable(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// PortNames returns the ports a table uses, sorted.
func PortNames(t *table.Table) []string {
	seen := map[string]bool{}
	for _, p := range t.Pairs {
		seen[p.Host.Port] = true
		seen[p.GPU.Port] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SyntheticPorts gives names (in order) ifindexes 1, 2, ... and MACs
// 02:5e:00:00:00:01, ...: reproducible port addresses for replay and tests.
func SyntheticPorts(names []string) map[string]Port {
	ports := make(map[string]Port, len(names))
	for i, n := range names {
		ports[n] = Port{Name: n, Index: uint32(i + 1), MAC: net.HardwareAddr{2, 0x5e, 0, 0, byte((i + 1) >> 8), byte(i + 1)}}
	}
	return ports
}

// IngressByMAC maps every endpoint MAC of the table to the port it sits
// behind: how replay decides where a captured frame came in.
func IngressByMAC(t *table.Table) map[[6]byte]string {
	m := map[[6]byte]string{}
	for _, p := range t.Pairs {
		m[[6]byte(p.Host.MAC)] = p.Host.Port
		m[[6]byte(p.GPU.MAC)] = p.GPU.Port
	}
	return m
}
