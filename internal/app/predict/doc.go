// Package predict is `dxpu model`: it reads profiler traces, builds each
// one's dependency graph (package model), predicts what a fabric of a
// given added round trip, link rate and read-request limits costs the
// workload, and reports it as tables, JSON, a markdown row per trace or an
// overhead-against-RTT plot, optionally beside the emulator's measurement.
package predict
