// Package e2e holds dxpu's end-to-end tests over real network namespaces:
// an emulated host (emu/host, emu/cuda) reaches an emulated GPU (emu/gpu)
// through a host-side bridge, the XDP switch and a GPU-side bridge, every
// hop a real kernel object:
//
//	netns host                     netns switch                      netns gpu
//	emu host RC                                                      emu GPU
//	  | TLPs (wall clock, emu/realtime)                                 ^ TLPs
//	host bridge --AF_PACKET-- dxhost <-veth-> swhost [XDP] swgpu <-veth-> dxgpu --AF_PACKET-- GPU bridge
//
// Frames are raw Ethernet, EtherType 0x88B5, the dxpu header right after
// the Ethernet header (layout and a worked hex example in tlp/encap). The
// host bridge sends to the switch port's MAC (02:5e:00:00:00:01); the XDP
// program checks the pair ID, ingress port and source MAC, rewrites source
// and destination MAC for the far side and redirects it out of the other
// port; CONTROL messages (the bridges' handshake and keepalives) take the
// Go slow path.
//
// The package has no code of its own: its tests need root, network
// namespaces and BPF, and go through internal/privtest.
package e2e
