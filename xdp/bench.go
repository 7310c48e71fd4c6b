package xdp

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/tlp/encap"
)

// BenchFigures are the results of BenchProgram.
type BenchFigures struct {
	Frame              string  `json:"frame"`
	Repeat             uint32  `json:"repeat"`
	Rounds             int     `json:"rounds"`
	XDPNsPerFrame      float64 `json:"xdp_ns_per_frame"`
	BaselineNsPerFrame float64 `json:"baseline_ns_per_frame"`
	Ratio              float64 `json:"ratio"`
	XDPAction          uint32  `json:"xdp_action"`
	BaselineAction     uint32  `json:"baseline_action"`
}

// BenchProgram measures the switch program against the minimal redirect
// program with BPF_PROG_TEST_RUN, in a private network namespace holding
// one veth port. The frame belongs to a hairpin pair (both endpoints behind
// the port, with the port's MAC and IP), so the rewrite leaves it unchanged
// and every repetition takes the full forwarding path: parse, pair lookup,
// ingress check, rewrite (UDP: addresses, ports, both checksums), counters,
// devmap redirect. Figures are medians over rounds of repeat runs each,
// alternating the two programs.
func BenchProgram(udp bool, repeat uint32, rounds int) (BenchFigures, error) {
	fig := BenchFigures{Frame: "dxpu-eth", Repeat: repeat, Rounds: rounds}
	if udp {
		fig.Frame = "dxpu-udp"
	}
	mac := net.HardwareAddr{2, 0xbe, 0, 0, 0, 1}
	ip := netip.MustParseAddr("10.99.0.1")
	sb, err := NewSandbox([]PortSpec{{Name: "bench0", MAC: mac, IP: ip}})
	if err != nil {
		return fig, err
	}
	defer sb.Close()
	err = sb.Do(func() error {
		var err error
		fig, err = benchIn(fig, sb.Ports()["bench0"], repeat, rounds)
		return err
	})
	return fig, err
}

func benchIn(fig BenchFigures, port switching.Port, repeat uint32, rounds int) (BenchFigures, error) {
	mac, ip := port.MAC, port.IP
	ep := table.Endpoint{Port: port.Name, MAC: mac, IP: ip}
	tb := &table.Table{Version: 1, Pairs: []table.Pair{{ID: 0x00b0b0, Host: ep, GPU: ep}}}
	sw, err := Load(Options{})
	if err != nil {
		return fig, err
	}
	defer sw.Close()
	if _, err := sw.Reconcile(tb, map[string]switching.Port{port.Name: port}); err != nil {
		return fig, err
	}
	l2 := &encap.L2{Dst: [6]byte(mac), Src: [6]byte(mac)}
	f := &encap.Fields{PairID: 0x00b0b0}
	tlp := make([]byte, 16+256) // 4-DW header + 256 bytes: a typical write
	tlp[0] = 0x60
	var frame []byte
	if fig.Frame == "dxpu-udp" {
		frame, err = encap.AppendDxpuUDP(nil, l2, &encap.L3{Src: ip, Dst: ip}, f, [][]byte{tlp})
	} else {
		frame, err = encap.AppendDxpuEth(nil, l2, f, [][]byte{tlp})
	}
	if err != nil {
		return fig, err
	}
	var xs, bs []float64
	for i := 0; i < rounds; i++ {
		r, err := sw.Bench(frame, port.Index, repeat)
		if err != nil {
			return fig, err
		}
		if r.SwitchAction != switching.XDPRedirect || r.BaselineAction != switching.XDPRedirect {
			return fig, fmt.Errorf("xdp: bench frame not redirected (switch action %d, baseline %d)", r.SwitchAction, r.BaselineAction)
		}
		fig.XDPAction, fig.BaselineAction = r.SwitchAction, r.BaselineAction
		xs = append(xs, float64(r.SwitchNs))
		bs = append(bs, float64(r.BaselineNs))
	}
	fig.XDPNsPerFrame, fig.BaselineNsPerFrame = median(xs), median(bs)

	if fig.BaselineNsPerFrame > 0 {
		fig.Ratio = fig.XDPNsPerFrame / fig.BaselineNsPerFrame
	}
	return fig, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
