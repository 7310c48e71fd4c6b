package xdp_test

import (
	"testing"

	"github.com/dxpu/dxpu/fabric/switching/afxdp"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestSlowPathToAFXDP registers an AF_XDP socket for the host port: CONTROL
// frames and frames of unknown pairs arrive on it, intact, while known
// pairs are still forwarded in XDP.
func TestSlowPathToAFXDP(t *testing.T) {
	x := newXDPTopology(t)
	var sock *afxdp.Socket
	if err := x.Switch.Do(func() error {
		var err error
		if sock, err = afxdp.Open(x.SwitchHost.Index, 0, afxdp.Config{}); err != nil {
			return err
		}
		return x.sw.SetXSK(x.SwitchHost.Index, 0, sock.FD())
	}); err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
	frames := [][]byte{
		switchtest.Frame(x.HostIf.MAC, x.SwitchHost.MAC, -1, nil, encap.MsgControl, e2ePair, false),
		switchtest.Frame(x.HostIf.MAC, x.SwitchHost.MAC, -1, nil, encap.MsgTLP, 0x00dead, false),
	}
	for _, f := range frames {
		if err := hostConn.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	waitfor.Progress(t, "frames on the slow path socket", func() (bool, uint64) {
		sock.Receive(8, func(f *afxdp.Frame) {
			got = append(got, append([]byte(nil), f.Buf[f.Off:f.End]...))
		})
		return len(got) >= len(frames), uint64(len(got))
	})
	if len(got) != len(frames) {
		t.Fatalf("slow path socket got %d frames, want %d", len(got), len(frames))
	}
	for i := range frames {
		if string(got[i]) != string(frames[i]) {
			t.Fatalf("slow-path frame %d altered:\n% x\nwant\n% x", i, got[i], frames[i])
		}
	}
}
