// Package switchbench is `dxpu bench switch`: it measures the XDP switch
// program against the minimal redirect program with BPF_PROG_TEST_RUN,
// the Go forwarding decision in process, and the userspace switch's
// packets per second between two veths. The XDP and veth figures need
// root; without it they are reported as errors and the Go figure is still
// measured.
package switchbench
