package afxdp

// The BPF object and its Go bindings are committed, like package xdp's;
// `go generate ./bridge/afxdp/...` reproduces them byte for byte
// (scripts/check-generate.sh).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel xskRedirect redirect.c -- -mcpu=v3 -Wall -Werror
