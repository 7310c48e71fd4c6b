package replay

import (
	"context"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/model"
)

// Measurer implements model.Measurer: it replays the graph on the emulator
// in virtual time, natively when the fabric adds nothing, otherwise over a
// fabric whose added round trip, bandwidth, tag limit and MRRS are the
// model's.
type Measurer struct {
	// Base holds the options every measurement starts from.
	Base Options
}

// Name says who measures, for reports.
const Name = "dxpu emulator (virtual time)"

// Measure implements model.Measurer.
func (m Measurer) Measure(ctx context.Context, g *model.Graph, f model.Fabric) (time.Duration, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	o := m.Base
	if f.RTT > 0 || f.Bandwidth > 0 {
		// The model's bandwidth is a payload rate and 0 means "no limit
		// beyond native PCIe"; the emulator's is a wire rate that also
		// carries each TLP's header and framing.
		wire := 1e15 // the GPU's own PCIe link then bounds the path
		if f.Bandwidth > 0 {
			wire = f.Bandwidth * float64(256+12+32) / 256
		}
		fab := topo.AddedRTT(f.RTT, wire)
		if f.Bandwidth == 0 {
			fab.OverheadBytes = pcie.PCIeOverheadBytes // nothing but PCIe framing
		}
		o.Fabric = &fab
	}
	o.TenBitTags = f.Tags > 256
	o.MaxOutstanding = f.Tags
	o.MRRS = f.MRRS
	res, err := Run(ctx, g, o)
	if err != nil {
		return 0, err
	}
	return res.Span, nil
}
