package replay

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// abortPath is a bridge pair whose host side answers the GPU's nth DMA
// read with Completer Abort.
type abortPath struct {
	inner    pcie.Path
	nth, got int
	up       pcie.Receiver
	down     pcie.Sender
}

func (p *abortPath) Connect(upstream, downstream pcie.Receiver) (down, up pcie.Sender) {
	p.up = upstream
	down, up = p.inner.Connect(pcie.ReceiverFunc(p.fromGPU), downstream)
	p.down = down
	return down, up
}

func (p *abortPath) fromGPU(v tlp.View) {
	if v.Kind() == tlp.MRd {
		if p.got++; p.got == p.nth {
			_, n := pcie.RequestBytes(v)
			p.down.SendTLP(pcie.AppendCpl(nil, 0, v.RequesterID(), v.Tag(), tlp.StatusCA, n))
			return
		}
	}
	p.up.ReceiveTLP(v)
}

// TestReplayEndsOnChannelFault: a DMA read of the GPU answered with CA
// midway through a replay over bridges stops the channel; the replay
// fails at once with the channel's fault, rather than completing over
// work that never ran, or running the bridges' keepalives for ten virtual
// minutes before it gives up.
func TestReplayEndsOnChannelFault(t *testing.T) {
	t.Parallel()
	w, err := trace.DecodeFile(filepath.Join("..", "..", "testdata", "emu", "mlp-train-emu.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := model.Build(w)
	if err != nil {
		t.Fatal(err)
	}
	f := topo.Fabric{RTT: 5 * time.Microsecond}
	var path *abortPath
	o := Options{TenBitTags: true, Fabric: &f, Path: func(s *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
		path = &abortPath{inner: &topo.BridgePath{S: s, Fabric: f, PairID: uint32(i + 1)}, nth: 200}
		return path
	}}
	start := time.Now()
	_, err = Run(context.Background(), g, o)
	t.Logf("replay after %v: %v", time.Since(start), err)
	if !errors.Is(err, cuda.ErrChannelStopped) || !strings.Contains(err.Error(), "completer abort") {
		t.Fatalf("replay with an aborted read: %v, want the channel fault", err)
	}
	if path.got < path.nth {
		t.Fatalf("the GPU issued %d reads, fewer than the %dth to fail", path.got, path.nth)
	}
}
