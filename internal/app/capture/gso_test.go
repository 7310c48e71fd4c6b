package capture

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dxpu/dxpu/fabric/switching"
)

// superFrame builds a GSO super-frame: Ethernet (with a VLAN tag when
// tagged), IPv4 or IPv6, UDP, and payload, lengths as the socket saw them.
func superFrame(v6, tagged bool, payload []byte) []byte {
	f := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}
	if tagged {
		f = append(f, 0x81, 0, 0, 7)
	}
	if v6 {
		f = append(f, 0x86, 0xdd, 0x60, 0, 0, 0)
		f = binary.BigEndian.AppendUint16(f, uint16(8+len(payload)))
		f = append(f, 17, 64)
		f = append(f, bytes.Repeat([]byte{0xfd, 1}, 16)...) // source and destination
	} else {
		f = append(f, 0x08, 0x00, 0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2)
	}
	f = append(f, 0x1b, 0xa7, 0x22, 0x97, 0, 0, 0xab, 0xcd) // ports 7079, 8855; length and checksum filled in per datagram
	return append(f, payload...)
}

// TestSplitUDPGSO: a super-frame is cut into datagrams of gso_size with
// their own IP and UDP lengths, IPv4 IDs and header checksums, and UDP
// checksums that verify, for IPv4 and IPv6, tagged or not; a snap length
// cuts each datagram, not the super-frame.
func TestSplitUDPGSO(t *testing.T) {
	payload := make([]byte, 700)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, c := range []struct {
		name        string
		v6, tagged  bool
		snap        int
		wantLengths []int
	}{
		{"ipv4", false, false, 65535, []int{300, 300, 100}},
		{"ipv4 tagged", false, true, 65535, []int{300, 300, 100}},
		{"ipv6", true, false, 65535, []int{300, 300, 100}},
		{"ipv4 snap 64", false, false, 64, []int{300, 300, 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := superFrame(c.v6, c.tagged, payload)
			hdrs := len(f) - len(payload)
			var got []byte
			i := 0
			ok, err := splitUDPGSO(f, len(f), 300, c.snap, nil, func(seg []byte, length int) error {
				if i >= len(c.wantLengths) {
					t.Fatalf("more than %d datagrams", len(c.wantLengths))
				}
				if length != hdrs+c.wantLengths[i] || len(seg) != min(length, c.snap) {
					t.Fatalf("datagram %d: %d bytes of %d, want %d of %d", i+1, len(seg), length, min(hdrs+c.wantLengths[i], c.snap), hdrs+c.wantLengths[i])
				}
				ip, udp, v6, _ := udpOffsets(seg)
				if v6 != c.v6 || binary.BigEndian.Uint16(seg[udp+4:]) != uint16(8+c.wantLengths[i]) {
					t.Errorf("datagram %d: UDP length %d", i+1, binary.BigEndian.Uint16(seg[udp+4:]))
				}
				if !v6 {
					if binary.BigEndian.Uint16(seg[ip+2:]) != uint16(28+c.wantLengths[i]) || binary.BigEndian.Uint16(seg[ip+4:]) != 0x1234+uint16(i) {
						t.Errorf("datagram %d: IPv4 length %d, ID %#x", i+1, binary.BigEndian.Uint16(seg[ip+2:]), binary.BigEndian.Uint16(seg[ip+4:]))
					}
					if switching.Checksum(seg[ip:udp], 0) != 0 {
						t.Errorf("datagram %d: bad IPv4 header checksum", i+1)
					}
				} else if binary.BigEndian.Uint16(seg[ip+4:]) != uint16(8+c.wantLengths[i]) {
					t.Errorf("datagram %d: IPv6 payload length %d", i+1, binary.BigEndian.Uint16(seg[ip+4:]))
				}
				if len(seg) == length {
					var pseudo uint32
					if v6 {
						pseudo = sumWords(seg[ip+8 : ip+40])
					} else {
						pseudo = sumWords(seg[ip+12 : ip+20])
					}
					if switching.Checksum(seg[udp:], pseudo+17+uint32(len(seg)-udp)) != 0 {
						t.Errorf("datagram %d: UDP checksum does not verify", i+1)
					}
					got = append(got, seg[hdrs:]...)
				}
				i++
				return nil
			})
			if !ok || err != nil || i != len(c.wantLengths) {
				t.Fatalf("split %v, %v, %d datagrams", ok, err, i)
			}
			if c.snap >= len(f) && !bytes.Equal(got, payload) {
				t.Errorf("the datagrams do not carry the payload in order")
			}
		})
	}
	// Not UDP, or one segment's worth: not cut.
	if ok, _ := splitUDPGSO(superFrame(false, false, payload[:200]), 242, 300, 65535, nil, nil); ok {
		t.Error("a frame within gso_size was cut")
	}
	arp := append([]byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x06}, make([]byte, 28)...)
	if ok, _ := splitUDPGSO(arp, len(arp), 10, 65535, nil, nil); ok {
		t.Error("an ARP frame was cut")
	}
}

// TestGSOUndescribed: a super-frame splitUDPGSO leaves alone is counted
// as one the capture cannot describe when its headers are bad (IPv4 IHL
// below 5) or it has no gso_size, but not when it fits in one datagram.
func TestGSOUndescribed(t *testing.T) {
	f := superFrame(false, false, make([]byte, 100))
	if gsoUndescribed(f, 300) {
		t.Error("a frame within gso_size counted as undescribed")
	}
	if !gsoUndescribed(f, 0) {
		t.Error("a super-frame without gso_size not counted")
	}
	bad := bytes.Clone(f)
	bad[14] = 0x40 // IHL 0
	if ok, err := splitUDPGSO(bad, len(bad)+100, 1, 65535, nil, func([]byte, int) error { return nil }); ok || err != nil {
		t.Errorf("IHL 0 cut: %v, %v", ok, err)
	}
	if !gsoUndescribed(bad, 1) {
		t.Error("a super-frame with IHL 0 not counted")
	}
}

// TestFinishChecksum: a UDP checksum left partial for the NIC (the field
// holds the pseudo-header's sum) is completed, also behind a VLAN tag put
// back in front of it.
func TestFinishChecksum(t *testing.T) {
	for _, tagged := range []bool{false, true} {
		f := superFrame(false, tagged, []byte("a datagram"))
		ip, udp, _, _ := udpOffsets(f)
		binary.BigEndian.PutUint16(f[ip+2:], uint16(len(f)-ip))
		binary.BigEndian.PutUint16(f[udp+4:], uint16(len(f)-udp))
		pseudo := sumWords(f[ip+12:ip+20]) + 17 + uint32(len(f)-udp)
		binary.BigEndian.PutUint16(f[udp+6:], ^switching.Checksum(nil, pseudo))
		shift := 0
		if tagged {
			shift = 4
		}
		finishChecksum(f, vnetHdr{flags: vnetNeedsCsum, csumStart: udp - shift, csumOffset: 6}, shift)
		if switching.Checksum(f[udp:], pseudo) != 0 {
			t.Errorf("tagged %v: UDP checksum %#04x does not verify", tagged, binary.BigEndian.Uint16(f[udp+6:]))
		}
	}
}
