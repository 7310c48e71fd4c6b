package waitfor

import (
	"strings"
	"testing"
)

// FuzzParseStat reads arbitrary /proc/PID/stat lines (the command name in
// them is the process's own, and may hold spaces and parentheses).
// Invariants: no panic; a line that parses gives the process group and
// the CPU times of the fields after the name's last ')'; a name of any
// bytes before a well-formed rest does not change what is read.
func FuzzParseStat(f *testing.F) {
	rest := " S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 3 2 20 0 1 0 1234 1000 100"
	f.Add("4243 (dxpu)"+rest, "dxpu")
	f.Add("4243 (a) b) c)"+rest, "a) b) c")
	f.Add("4243 (x"+rest, "")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, line, name string) {
		_, _, _ = parseStat(line)
		if strings.ContainsAny(name, "\n") {
			return
		}
		pgid, cpu, ok := parseStat("4243 (" + name + ")" + rest)
		if !ok || pgid != 4242 || cpu != 17+5+3+2 {
			t.Fatalf("name %q: pgid %d, cpu %d, ok %v", name, pgid, cpu, ok)
		}
	})
}
