package bridgeagent

import (
	"context"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/tlp"
)

// device builds the GPU box's PCIe side of one pair on its runner: a fresh
// emulated GPU of the pair's model (a GPU lent anew starts from reset), or
// a memory-backed device. It returns the device's run function.
func (a *Agent) device(pr *pairRun) (func(context.Context) error, error) {
	if a.o.PCIe == PCIeMemory {
		mem, err := nettlp.NewSparseMemory(a.o.MemBase, a.o.MemSize, nil)
		if err != nil {
			return nil, err
		}
		d, err := nettlpside.NewMemoryDevice(pr.runner, mem, nettlp.CompleterConfig{MPS: a.o.MPS, CompleterID: tlp.NewID(3, 0, 0)})
		if err != nil {
			return nil, err
		}
		d.OnMPS = bridged.LogMPS(a.o.Log, d.MPS(), "pair", pr.p.ID)
		return d.Run, nil
	}
	m, err := modelOf(pr.p.Model)
	if err != nil {
		return nil, err
	}
	g, err := realtime.NewBridgedGPU(pr.runner, realtime.BridgedGPUConfig{GPU: gpu.Config{Model: m}})
	if err != nil {
		return nil, err
	}
	return g.Run, nil
}
