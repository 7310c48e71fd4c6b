package table

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

// endpointJSON is Endpoint on the wire: the MAC as "aa:bb:cc:dd:ee:ff", which
// people and other languages can read (net.HardwareAddr alone would marshal
// as base64).
type endpointJSON struct {
	Port    string     `json:"port"`
	MAC     string     `json:"mac"`
	IP      netip.Addr `json:"ip,omitzero"`
	UDPPort uint16     `json:"udp_port,omitempty"`
}

// MarshalJSON writes the MAC in colon-separated hex.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	j := endpointJSON{Port: e.Port, IP: e.IP, UDPPort: e.UDPPort}
	if len(e.MAC) > 0 {
		j.MAC = e.MAC.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the MAC in any form net.ParseMAC accepts, or as the
// base64 that earlier versions wrote.
func (e *Endpoint) UnmarshalJSON(b []byte) error {
	var j endpointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var mac net.HardwareAddr
	if j.MAC != "" {
		m, err := net.ParseMAC(j.MAC)
		if err != nil {
			raw, berr := base64.StdEncoding.DecodeString(j.MAC)
			if berr != nil || len(raw) != 6 {
				return fmt.Errorf("%w: mac %q is neither aa:bb:cc:dd:ee:ff nor base64 of 6 bytes", ErrInvalid, j.MAC)
			}
			m = raw
		}
		mac = m
	}
	*e = Endpoint{Port: j.Port, MAC: mac, IP: j.IP, UDPPort: j.UDPPort}
	return nil
}
