package scalebench

import (
	"strings"
	"testing"
	"time"
)

// FuzzStatCPU reads arbitrary /proc/PID/stat lines of a bridge process.
// Invariants: no panic; a name of any bytes (it may hold spaces and
// parentheses) before a well-formed rest does not change the CPU time
// read; a line that does not parse reads 0.
func FuzzStatCPU(f *testing.F) {
	rest := " S 1 4242 4242 0 -1 4194560 100 0 0 0 170 50 3 2 20 0 1 0 1234 1000 100"
	f.Add("4243 (dxpu)"+rest, "dxpu")
	f.Add("4243 (a) b) c)"+rest, "a) b) c")
	f.Add("4243 (x", "")
	f.Fuzz(func(t *testing.T, line, name string) {
		_ = statCPU(line) // the kernel's numbers: only no panic is asked
		if strings.Contains(name, "\n") {
			return
		}
		if d := statCPU("4243 (" + name + ")" + rest); d != 2200*time.Millisecond {
			t.Fatalf("name %q: %v", name, d)
		}
	})
}
