package ctl

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
)

// BoxExample and HostExample are the JSON that `ctl box add --help` and
// `ctl host add --help` show (examples/box.json and host.json are longer
// versions; a test decodes all of them).
const BoxExample = `{
  "id": "box1",
  "bridge": {"switch_port": "eth2", "mac": "02:00:00:00:01:01", "ip": "10.77.0.20", "udp_port": 8855},
  "location": {"pod": "pod1", "rack": "r2"},
  "gpus": [{"id": "box1-gpu0", "model": "H100", "memory_mib": 81920, "bdf": "0000:03:00.0", "pcie_switch": 0, "pcie_port": 0}]
}`

const HostExample = `{
  "id": "host1",
  "bridge": {"switch_port": "eth1", "mac": "02:00:00:00:02:01", "ip": "10.77.0.10", "udp_port": 8855},
  "location": {"pod": "pod1", "rack": "r1"},
  "ports": 32
}`

// managerSet are, by registration type, the fields the manager fills in
// on its answers: a box or host file that sets them is refused
// (fabric/manager's answerOnly) or must repeat the box's id (gpus[].box),
// so the help does not offer them.
var managerSet = map[reflect.Type][]string{
	reflect.TypeFor[pool.Box]():  {"gpus[].box", "gpus[].unreachable", "gpus[].allocation", "unreachable"},
	reflect.TypeFor[pool.Host](): {"used_ports"},
}

// settable lists the JSON fields of t a registration may set: every field
// of the type but managerSet's.
func settable(t reflect.Type) []string {
	var out []string
	for _, f := range jsonfile.Fields(t) {
		if !slices.Contains(managerSet[t], f) {
			out = append(out, f)
		}
	}
	return out
}

// AddHelp is the long help of `ctl KIND add`: the fields a file may set,
// those the manager fills in, and an example.
func AddHelp(kind string, t reflect.Type, example string) string {
	notes := ""
	if t == reflect.TypeFor[pool.Box]() {
		notes = ` gpus[].health is healthy (the default) or
unhealthy; draining takes a new box out of allocation ('ctl drain' changes
a known box's).`
	}
	return fmt.Sprintf(`Register a %[1]s, or replace the %[1]s with the same id, from a JSON file (- for
stdin). Unknown fields, a key given twice and a key in another case are
refused, with their line and column (exit 2), as the manager refuses them
in a direct POST; the file is sent as written. The fields:

  %[2]s

bridge is the %[1]s's bridge as the switch sees it: switch_port, the switch's
interface toward it ("udp" for a switch in --mode udp), its MAC, and for dxpu
over UDP its IPv4 address and UDP port.%[3]s

The manager fills in, on its answers only (leave them out of the file):

  %[4]s

Example (see also examples/%[1]s.json):

%[5]s`, kind, strings.Join(settable(t), "\n  "), notes, strings.Join(managerSet[t], ", "), indent(example, "  "))
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}
