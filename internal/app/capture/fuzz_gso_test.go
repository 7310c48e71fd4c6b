package capture

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FuzzLiveFrame runs what `dxpu pcap live` does with each frame the packet
// socket hands it, on arbitrary bytes: the control messages (timestamp,
// VLAN tag), the virtio_net_hdr, the cut of a UDP GSO super-frame into
// datagrams, and the completion of a partial checksum. The frame is what
// any sender on the link (a VM behind a tap, another host) put on it.
// Invariants: no panic; a cut super-frame becomes ceil(payload/gso_size)
// datagrams, each within the snap length, whose wire lengths add up to the
// super-frame's payload plus one set of headers each; the input frame is
// left as it was.
func FuzzLiveFrame(f *testing.F) {
	payload := bytes.Repeat([]byte{0x5a, 0xa5, 7}, 300)
	v4, v6, tagged := superFrame(false, false, payload), superFrame(true, false, payload), superFrame(false, true, payload)
	vh := []byte{1, vnetGSOUDPL4, 0, 0, 0x2c, 1, 34, 0, 6, 0} // NEEDS_CSUM, UDP_L4, gso 300, csum at 34+6
	aux := make([]byte, 20)
	aux[0] = byte(unix.TP_STATUS_VLAN_VALID)
	aux[16] = 7
	oob := append(unix.UnixRights(0), fuzzCmsg(unix.SOL_PACKET, unix.PACKET_AUXDATA, aux)...)
	f.Add(v4, uint16(0), uint16(300), uint16(65535), vh, oob)
	f.Add(v6, uint16(0), uint16(300), uint16(64), vh, []byte{})
	f.Add(tagged, uint16(40), uint16(100), uint16(128), vh, oob)
	f.Add(v4[:60], uint16(900), uint16(1), uint16(1500), vh, []byte{})
	f.Fuzz(func(t *testing.T, frame []byte, extra, gso, snap uint16, vnet, oob []byte) {
		in := bytes.Clone(frame)
		_, _, _ = control(oob)
		var h vnetHdr
		if len(vnet) >= vnetHdrLen {
			h = parseVnetHdr(vnet)
		}
		length := len(frame) + int(extra)%2048 // the frame on the wire; the socket may hold less
		sn := int(snap) + 1
		n, wire := 0, 0
		split, err := splitUDPGSO(frame, length, int(gso), sn, nil, func(seg []byte, l int) error {
			if len(seg) > sn || len(seg) > l {
				t.Fatalf("datagram of %d bytes, wire length %d, snap %d", len(seg), l, sn)
			}
			n++
			wire += l
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if split {
			_, udp, _, _ := udpOffsets(frame)
			hdrs := udp + 8
			want := (length - hdrs + int(gso) - 1) / int(gso)
			if n != want || wire != length-hdrs+n*hdrs {
				t.Fatalf("%d-byte super-frame (headers %d, gso %d): %d datagrams of %d bytes in all, want %d", length, hdrs, gso, n, wire, want)
			}
		}
		if !bytes.Equal(frame, in) {
			t.Fatal("cutting changed the super-frame")
		}
		for _, shift := range []int{0, 4} {
			finishChecksum(bytes.Clone(frame), h, shift)
		}
	})
}

// fuzzCmsg builds one control message.
func fuzzCmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}
