// Package switchd is `dxpu switch`: the switch daemon. It forwards dxpu
// frames between the host bridge and the GPU bridge of every pair in its
// table through one data path (the XDP program with a Go slow path, the Go
// forwarder over AF_XDP or AF_PACKET sockets, or a UDP relay), keeps the
// table in force from a file or from the manager, and serves its counters
// to Prometheus.
package switchd
