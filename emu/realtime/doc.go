// Package realtime runs the emulated world on the wall clock: the
// simulator's clock is held to the time elapsed since start, events run
// when their time comes, and components that live outside the simulation
// (bridges driven by bridge/driver over real UDP sockets) post their input
// into it from their own goroutines. Together with UDPPath it is the
// second clock of the emulator: the same host, GPU and driver code, with
// the fabric a pair of real dxpu bridges exchanging frames over loopback.
package realtime
