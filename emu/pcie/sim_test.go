package pcie

import "github.com/dxpu/dxpu/sim"

func newSim() *sim.Sim { return sim.New(1) }
