//go:build !linux

package udp

import "net/netip"

// ListenBusyPoll is Listen where sockets outside the runtime's poller are
// not offered (see the Linux version).
func ListenBusyPoll(local, peer netip.AddrPort) (*Conn, error) { return Listen(local, peer) }

// rawSock does not exist here: Conn.raw is always nil.
type rawSock struct{ local netip.AddrPort }

func (*rawSock) close() error             { return nil }
func (*Conn) sendRaw([]byte) error        { return nil }
func (*Conn) recvRaw([]byte) (int, error) { return 0, nil }
