package capture

import "testing"

// FuzzParseBPF: `pcap capture --bpf` text (tcpdump -ddd output) from a user
// never panics, and a program it accepts is bounded by its instruction
// count line.
func FuzzParseBPF(f *testing.F) {
	f.Add("4\n40 0 0 12\n21 0 1 34997\n6 0 0 262144\n6 0 0 0\n")
	f.Add("1\n6 0 0 0\n")
	f.Add("")
	f.Add("99999999999\n")
	f.Fuzz(func(t *testing.T, s string) {
		prog, err := ParseBPF(s)
		if err == nil && (len(prog) == 0 || len(prog) > 4096) {
			t.Fatalf("accepted a program of %d instructions", len(prog))
		}
	})
}
