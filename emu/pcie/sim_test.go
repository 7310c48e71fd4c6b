package pcie

import "github.com/dxpu/dxpu/bridge/sim"

func newSim() *sim.Sim { return sim.New(1) }
