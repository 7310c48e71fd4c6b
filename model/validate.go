package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// Measurer runs a graph in a world that really has the fabric, such as the
// emulator replaying it op by op in virtual time, and returns the span it
// measured (first start to last end, as Graph.Baseline). Measure with Native
// gives the measurer's own native span, the base of its overhead.
type Measurer interface {
	Measure(ctx context.Context, g *Graph, f Fabric) (time.Duration, error)
}

// ErrNoMeasurer is returned by Validate when it is given no Measurer:
// validation needs the emulator (package emu/replay has one).
var ErrNoMeasurer = errors.New("model: validation needs a measurer (the emulator)")

// Check is the model's prediction and a measurement side by side at one RTT.
type Check struct {
	RTT              time.Duration
	PredictedPct     float64
	MeasuredPct      float64
	MeasuredNative   time.Duration
	MeasuredFabric   time.Duration
	DifferencePoints float64 // MeasuredPct - PredictedPct
}

// Validate measures g natively and at each RTT with m and sets each
// measured overhead beside the prediction.
func Validate(ctx context.Context, m Measurer, g *Graph, f Fabric, rtts []time.Duration) ([]Check, error) {
	if m == nil {
		return nil, ErrNoMeasurer
	}
	native, err := m.Measure(ctx, g, f.WithRTT(0))
	if err != nil {
		return nil, fmt.Errorf("model: measuring %s natively: %w", g.Name, err)
	}
	if native <= 0 {
		return nil, fmt.Errorf("model: measurer returned native span %s for %s", sim.FormatDuration(native), g.Name)
	}
	out := make([]Check, 0, len(rtts))
	for _, r := range rtts {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		got, err := m.Measure(ctx, g, f.WithRTT(r))
		if err != nil {
			return out, fmt.Errorf("model: measuring %s at RTT %s: %w", g.Name, sim.FormatDuration(r), err)
		}
		p := g.Predict(f.WithRTT(r))
		c := Check{RTT: r, PredictedPct: p.OverheadPct, MeasuredNative: native, MeasuredFabric: got,
			MeasuredPct: pct(got, native)}
		c.DifferencePoints = c.MeasuredPct - c.PredictedPct
		out = append(out, c)
	}
	return out, nil
}

// ReplayMeasurer measures by replaying the graph with the model's own
// equations. It is the reference a real measurer is tested against (and
// what Validate agrees with exactly); it proves nothing about the fabric.
type ReplayMeasurer struct{}

// Measure implements Measurer.
func (ReplayMeasurer) Measure(ctx context.Context, g *Graph, f Fabric) (time.Duration, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	return g.Retime(f).Span, ctx.Err()
}
