package xdp

// The BPF object and its Go bindings are committed; `go generate ./xdp/...`
// must reproduce them byte for byte (scripts: xdp/check-generate.sh).
// Fixed flags and bpf_minimal.h (instead of system headers) keep the output
// independent of the build machine.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -type counters -type pair -type direction xdpSwitch switch.c -- -mcpu=v3 -Wall -Werror
