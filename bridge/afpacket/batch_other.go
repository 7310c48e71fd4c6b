//go:build !linux

package afpacket

// batch is empty where there are no sendmmsg(2) and recvmmsg(2): a runner
// sends and receives one frame per call.
type batch struct{}

func (c *Conn) initBatch() error { return nil }
