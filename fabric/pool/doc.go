// Package pool is dxpu's GPU inventory and allocator: boxes of GPUs, hosts
// with virtual downstream ports, where each sits in the network, the measured
// round-trip time between bridges, and the allocations that lend GPUs to
// hosts. It is pure logic: no I/O, no clocks, no goroutines. The manager
// (fabric/manager) persists what it returns and drives the hot-plug saga.
//
// # Model
//
// A Box is a GPU-side bridge with GPUs behind its PCIe switch(es); each GPU
// has a model, memory size, local BDF, and a position (PCIe switch index and
// downstream port) behind the box switch. A Host is a host-side bridge that
// exposes Ports virtual downstream ports (at least 32); every GPU lent to the
// host occupies one of them. Every lent GPU is one host-GPU pair with a 24-bit
// pair ID that is unique in the pool and tags every frame of that pair.
//
// # Registration
//
// AddBox and AddHost register a bridge or replace its registration. No two
// bridges, boxes or hosts, share an endpoint: the same switch port and MAC,
// or the same IP and UDP port, is ErrConflict naming the bridge that has it
// (the forwarding table would send both ends of a pair to one place). A
// bridge with GPUs lent keeps its endpoint and agent URL, since the table,
// the agents and the journal name them: a change is ErrInUse naming the
// lent GPUs and allocations. A lent GPU keeps the fields it was lent with:
// one left empty (or zero) in the new registration keeps its value, a
// different one is ErrInUse.
//
// # Allocation
//
// Reserve(id, Request) is all or nothing under one lock, so concurrent
// requests never hand out one GPU twice. Candidates are healthy, free GPUs of
// boxes that are not draining and match the model, memory and max-RTT
// constraints. Boxes are ranked by RTT to the host (measured, or estimated
// from rack and pod). The allocator takes the smallest RTT radius whose boxes
// hold enough GPUs, then inside it:
//
//   - one box fits: the best fit (fewest free GPUs that still fit), so that
//     large boxes stay whole for large requests;
//   - otherwise (or with Spread): boxes largest first, or round-robin one
//     GPU per box with Spread, so as few boxes as possible are touched;
//   - inside a box the same best-fit rule picks the PCIe switch, so that
//     peer-to-peer traffic stays under one switch.
//
// SameBox requires every GPU from one box. An allocation that cannot be met
// returns ErrInsufficient and changes nothing. A request with a RequestID
// that an existing allocation carries returns that allocation with
// ErrDuplicate, so retries are idempotent.
//
// # Life of an allocation
//
//	Reserve -> StatePending -> Activate -> StateActive -> BeginRelease ->
//	StateReleasing -> Remove
//
// A pending allocation whose saga fails is removed with Remove. GPU failure
// (SetHealth unhealthy) takes the GPU out of its allocation, records it in
// Lost, and leaves every other GPU alone.
package pool
