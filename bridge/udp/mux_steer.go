package udp

import (
	"golang.org/x/net/bpf"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Steering: with it (Linux), each pair of a Mux gets a UDP socket of its
// own, bound to the mux's address in one SO_REUSEPORT group, and a
// classic BPF program attached to the group (SO_ATTACH_REUSEPORT_CBPF,
// no privilege needed) picks the socket of each datagram by the pair ID
// in its dxpu header: the kernel hands a pair's frames to its runner
// directly, and no goroutine of the mux handles them. The program returns
// the socket's place in the group (the mux's own socket is 0, each pair
// socket its place in the order it was bound); a frame too short, of
// another version or of a pair without a socket goes to 0, where the mux
// counts it as before. Pair sockets are never closed while the mux runs:
// closing one would move the group's last socket into its place, and the
// frames of the pair there would go astray until the program was
// replaced; a closed pair's socket waits for the next pair instead.

// maxSteered bounds the pairs the program names (2 instructions each, of
// the 4096 a classic BPF program may have); pairs past it go through the
// mux's queues.
const maxSteered = 1024

// steerProgram returns the program that sends a frame of pair id to
// place[id] and anything else to 0.
func steerProgram(place map[uint32]uint32) []bpf.Instruction {
	p := []bpf.Instruction{
		// At the UDP payload: the dxpu header.
		bpf.LoadExtension{Num: bpf.ExtLen},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: encap.HeaderLen, SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		bpf.LoadAbsolute{Off: encap.HeaderVersionFlagsOffset, Size: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: encap.Version, SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		// The 24-bit pair ID: the low three bytes of the word before.
		bpf.LoadAbsolute{Off: encap.HeaderPairIDOffset - 1, Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xffffff},
	}
	for id, at := range place {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: id, SkipFalse: 1}, bpf.RetConstant{Val: at})
	}
	return append(p, bpf.RetConstant{Val: 0})
}
