package switchreplay

import (
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
)

// FuzzParsePortAddrs reads arbitrary `dxpu replay --port-addr` values.
// Invariants: a refusal is one line naming the flag and leaves the ports
// as they were; an accepted value sets the named port's MAC (6 bytes) and,
// when given, an IPv4 address, and touches no other port.
func FuzzParsePortAddrs(f *testing.F) {
	for _, s := range []string{"p1=02:00:00:00:00:09", "p2=02:00:00:00:00:0a/10.0.0.9", "p3=zz", "p1=02:00:00:00:00:09/::1", "nope=02:00:00:00:00:01", "p1", "p1=00:00:5e:00:53:01:02:03"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ports := switching.SyntheticPorts([]string{"p1", "p2", "p3"})
		before := map[string]string{}
		for n, p := range ports {
			before[n] = p.MAC.String() + "/" + p.IP.String()
		}
		name, _, _ := strings.Cut(spec, "=")
		err := parsePortAddrs(ports, []string{spec})
		for n, p := range ports {
			changed := p.MAC.String()+"/"+p.IP.String() != before[n]
			if changed && (err != nil || n != name) {
				t.Fatalf("%q (%v) changed port %s", spec, err, n)
			}
			if n == name && err == nil && (len(p.MAC) != 6 || p.IP.IsValid() && !p.IP.Is4()) {
				t.Fatalf("%q set %s to %v %v", spec, n, p.MAC, p.IP)
			}
		}
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "--port-addr") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
		}
	})
}
