// Package bridgeagent is `dxpu bridge agent`: a bridge daemon that joins
// the control plane. It serves the agent API (package
// fabric/manager/agentapi) that the manager's allocation saga calls, runs
// one dxpu bridge per pair it is given, and, on a host, drives the hot-plug
// of an emulated host (emu/host on the wall clock) whose virtual switch
// ports receive the lent GPUs.
package bridgeagent
