// Package netns makes network namespaces and the veth pairs between them,
// for products that build a network of their own (`dxpu bench e2e` puts
// its host side, switch and GPU side each in one) and for the test rigs
// that wrap it (internal/xdptest). It imports no testing package: the dxpu
// binary links it.
//
// A namespace is held by a file descriptor (anonymous: it disappears when
// the last holder lets go) or, for New with a name, also by a bind mount
// at /run/netns/NAME, where `ip netns` finds it. Code runs inside one with
// NS.Do, on an OS thread that enters the namespace and is thrown away
// afterwards: sockets opened there stay in the namespace for their whole
// life, whichever goroutine uses them later, and no other goroutine ever
// runs on a thread left in the wrong namespace.
//
// Links are made through a netlink socket opened inside the namespace, so
// no thread changes namespace for them. NS.Close deletes every link that
// NS.AddVeth made (a veth's two ends go together), then lets go of the
// namespace; every constructor undoes what it did when a later step
// fails. Root (CAP_NET_ADMIN and CAP_SYS_ADMIN) is needed throughout.
package netns
