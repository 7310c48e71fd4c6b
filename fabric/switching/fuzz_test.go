package switching_test

import (
	"bytes"
	"encoding/binary"
	"github.com/dxpu/dxpu/fabric/table"
	"net/netip"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
)

// FuzzForward checks the decision's invariants on arbitrary frames (with
// the slow path's ForwardControl after Forward, as the drivers run them):
// it never panics; frames it does not forward are left untouched; forwarded
// frames keep their dxpu header and payload, change length only by a VLAN
// tag, leave through a port of the pair, carry the far endpoint's MAC, and
// keep a valid IPv4 checksum valid; the same input always gets the same
// result.
func FuzzForward(f *testing.F) {
	for _, c := range switchtest.Corpus() {
		f.Add(c.Frame, uint8(testIndex[c.Port]-10))
	}
	fwd, ports := newForwarder(f)
	fwd.Rand = func() uint32 { return 0 } // DropPPM pairs always drop: deterministic
	macs := map[[6]byte]bool{}
	for _, p := range switchtest.Table().Pairs {
		macs[[6]byte(p.Host.MAC)] = true
		macs[[6]byte(p.GPU.MAC)] = true
	}
	egress := map[uint32]bool{}
	for _, p := range ports {
		egress[p.Index] = true
	}
	f.Fuzz(func(t *testing.T, frame []byte, port uint8) {
		in := uint32(port%4) + 10 // 10 is no port of the switch
		buf := append(make([]byte, switching.Headroom), frame...)
		res := fwd.Forward(buf, switching.Headroom, in)
		buf2 := append(make([]byte, switching.Headroom), frame...)
		res2 := fwd.Forward(buf2, switching.Headroom, in)
		if res != res2 || !bytes.Equal(buf, buf2) {
			t.Fatalf("not deterministic: %+v vs %+v", res, res2)
		}
		if res.Off < 0 || res.Off > len(buf) {
			t.Fatalf("offset %d outside a %d-byte buffer", res.Off, len(buf))
		}
		out := buf[res.Off:]
		if res.Verdict == switching.VerdictSlowPath {
			// The slow path decides for good: never the slow path again.
			res = fwd.ForwardControl(buf, switching.Headroom, in)
			if res.Verdict == switching.VerdictSlowPath {
				t.Fatalf("ForwardControl returned the slow path")
			}
			out = buf[res.Off:]
		}
		if res.Verdict != switching.VerdictForward {
			if !bytes.Equal(out, frame) {
				t.Fatalf("%v frame was modified", res.Verdict)
			}
			return
		}
		if d := len(out) - len(frame); d != 0 && d != 4 && d != -4 {
			t.Fatalf("forwarded frame changed length by %d", d)
		}
		if !egress[res.Egress] || !macs[[6]byte(out[0:6])] {
			t.Fatalf("forwarded to port %d, MAC % x: not the table's", res.Egress, out[0:6])
		}
		inL3, _, _ := ethInfo(frame)
		outL3, _, _ := ethInfo(out)
		if binary.BigEndian.Uint16(frame[inL3-2:]) == 0x88B5 {
			if !bytes.Equal(out[outL3:], frame[inL3:]) {
				t.Fatal("dxpu header or body changed")
			}
			return
		}
		ihl := int(frame[inL3]&0xf) * 4
		if switching.Checksum(frame[inL3:inL3+ihl], 0) == 0 && switching.Checksum(out[outL3:outL3+ihl], 0) != 0 {
			t.Fatal("valid IPv4 checksum made invalid")
		}
		if !bytes.Equal(out[outL3+ihl+8:], frame[inL3+ihl+8:]) {
			t.Fatal("UDP payload changed")
		}
	})
}

// FuzzForwardDatagram: never panics; a forwarded datagram came from one
// endpoint of its pair (IP and port) and goes to the other; the payload is
// never modified.
func FuzzForwardDatagram(f *testing.F) {
	ports := switching.SyntheticPorts([]string{switchtest.P1, switchtest.P2, switchtest.P3})
	rules, _, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil {
		f.Fatal(err)
	}
	fwd := switching.NewForwarder(0)
	fwd.Rand = func() uint32 { return 0 }
	fwd.Update(rules)
	hdr := make([]byte, 48)
	hdr[0], hdr[1], hdr[4] = 0x10, 1, byte(switchtest.PairVLAN)
	f.Add(hdr, []byte{10, 0, 1, 2}, uint16(9000))
	f.Add(hdr, []byte{10, 0, 2, 2}, uint16(8855))
	f.Fuzz(func(t *testing.T, payload, ip []byte, port uint16) {
		if len(ip) != 4 {
			return
		}
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip)), port)
		orig := append([]byte(nil), payload...)
		to, res := fwd.ForwardDatagram(payload, from, switching.UDPIndex)
		if !bytes.Equal(orig, payload) {
			t.Fatal("payload modified")
		}
		if res.Verdict != switching.VerdictForward {
			return
		}
		var pair table.Pair
		for _, p := range switchtest.Table().Pairs {
			if p.ID == res.PairID {
				pair = p
			}
		}
		ep := func(e table.Endpoint) netip.AddrPort {
			p := e.UDPPort
			if p == 0 {
				p = switching.DefaultUDPPort
			}
			return netip.AddrPortFrom(e.IP, p)
		}
		h, g := ep(pair.Host), ep(pair.GPU)
		if !(from == h && to == g) && !(from == g && to == h) {
			t.Fatalf("pair %#x: %v -> %v is not host<->GPU (%v, %v)", res.PairID, from, to, h, g)
		}
	})
}
