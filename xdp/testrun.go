package xdp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// xdpMD is struct xdp_md as BPF_PROG_TEST_RUN takes it for context.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// TestRun runs the switch program once on frame as if it had arrived on
// ifindex ingress (an interface of the calling thread's network namespace)
// and returns the XDP action and the frame as the program left it. Counters
// and fault injection behave as for live traffic; redirects are not sent.
func (s *Switch) TestRun(frame []byte, ingress uint32) (uint32, []byte, error) {
	return testRun(s.objs.DxpuSwitch, frame, ingress)
}

func testRun(prog *ebpf.Program, frame []byte, ingress uint32) (uint32, []byte, error) {
	if len(frame) < 14 {
		return 0, nil, fmt.Errorf("xdp: test run needs a frame of at least 14 bytes (an Ethernet header), got %d", len(frame))
	}
	out := make([]byte, len(frame)+256)
	md := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: ingress}
	// Run reslices DataOut to what the kernel wrote: the linear part and,
	// for frames larger than a page, the fragments after it.
	opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: md}
	ret, err := prog.Run(opts)
	if err != nil {
		return 0, nil, fmt.Errorf("xdp: test run on %d bytes from ifindex %d: %w", len(frame), ingress, err)
	}
	return ret, opts.DataOut, nil
}

// progTestRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr.
type progTestRunAttr struct {
	ProgFD      uint32
	Retval      uint32
	DataSizeIn  uint32
	DataSizeOut uint32
	DataIn      uint64
	DataOut     uint64
	Repeat      uint32
	Duration    uint32
	CtxSizeIn   uint32
	CtxSizeOut  uint32
	CtxIn       uint64
	CtxOut      uint64
	Flags       uint32
	CPU         uint32
	BatchSize   uint32
	_           uint32
}

const bpfProgTestRun = 10

// timedRun runs prog repeat times in the kernel on frame (from ingress) and
// returns the last action and the kernel's mean time per run in ns.
// cilium/ebpf's Benchmark cannot pass a context, hence the raw syscall.
func timedRun(prog *ebpf.Program, frame []byte, ingress uint32, repeat uint32) (uint32, uint32, error) {
	if len(frame) < 14 {
		return 0, 0, fmt.Errorf("xdp: timed run needs a frame of at least 14 bytes, got %d", len(frame))
	}
	ctx := make([]byte, binary.Size(xdpMD{}))
	binary.NativeEndian.PutUint32(ctx[4:], uint32(len(frame)))
	binary.NativeEndian.PutUint32(ctx[12:], ingress)
	data := append([]byte(nil), frame...)
	attr := progTestRunAttr{
		ProgFD:     uint32(prog.FD()),
		DataSizeIn: uint32(len(data)),
		DataIn:     uint64(uintptr(unsafe.Pointer(&data[0]))),
		Repeat:     repeat,
		CtxSizeIn:  uint32(len(ctx)),
		CtxIn:      uint64(uintptr(unsafe.Pointer(&ctx[0]))),
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		runtime.KeepAlive(data)
		runtime.KeepAlive(ctx)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, 0, fmt.Errorf("xdp: BPF_PROG_TEST_RUN: %w", errno)
		}
		return attr.Retval, attr.Duration, nil
	}
}

// Bench measures ns per frame of the switch program and of the minimal
// redirect baseline (dxpu_redirect_baseline: one devmap redirect keyed by
// the ingress ifindex, which must be a port) on the same frame, in the same
// run. frame should be idempotent under the switch's rewrite (a hairpin
// pair whose endpoint MACs equal the port's) so every repetition takes the
// forwarding path.
func (s *Switch) Bench(frame []byte, ingress uint32, repeat uint32) (BenchResult, error) {
	var r BenchResult
	var err error
	if r.SwitchAction, r.SwitchNs, err = timedRun(s.objs.DxpuSwitch, frame, ingress, repeat); err != nil {
		return r, err
	}
	if r.BaselineAction, r.BaselineNs, err = timedRun(s.objs.DxpuRedirectBaseline, frame, ingress, repeat); err != nil {
		return r, err
	}
	return r, nil
}

// BenchResult is one Bench measurement.
type BenchResult struct {
	SwitchNs, BaselineNs         uint32 // mean ns per frame
	SwitchAction, BaselineAction uint32 // XDP action of the last run
}
