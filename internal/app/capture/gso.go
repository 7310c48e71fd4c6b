package capture

import (
	"encoding/binary"

	"github.com/dxpu/dxpu/fabric/switching"
)

// A packet socket sees a UDP segmentation-offload (GSO) send as one
// super-frame: one set of headers and the payloads of several datagrams
// back to back, which the kernel, or the NIC, cuts into datagrams of
// gso_size bytes after the capture point (on lo the receiver cuts them).
// The bridges send batches that way, so a capture kept as the socket saw
// it shows two or more dxpu frames glued into one datagram that no
// receiver ever gets. With PACKET_VNET_HDR the kernel says so: each frame
// comes behind a struct virtio_net_hdr, and a UDP_L4 super-frame is cut
// here into the datagrams the wire carries, each with its own lengths and
// checksums.

// vnetHdrLen is the size of struct virtio_net_hdr (no num_buffers).
const vnetHdrLen = 10

// virtio_net_hdr fields (include/uapi/linux/virtio_net.h).
const (
	vnetNeedsCsum = 1 // flags: the checksum at CsumStart+CsumOffset is partial
	vnetGSOUDPL4  = 5 // gso_type: UDP segmentation
	vnetGSOECN    = 0x80
)

// vnetHdr is a received struct virtio_net_hdr, in the host's byte order
// (the kernel fills it little-endian only for virtio 1.0 devices; packet
// sockets use the native order).
type vnetHdr struct {
	flags, gsoType        uint8
	gsoSize               int
	csumStart, csumOffset int
}

func parseVnetHdr(b []byte) vnetHdr {
	return vnetHdr{
		flags:      b[0],
		gsoType:    b[1] &^ vnetGSOECN,
		gsoSize:    int(binary.NativeEndian.Uint16(b[4:])),
		csumStart:  int(binary.NativeEndian.Uint16(b[6:])),
		csumOffset: int(binary.NativeEndian.Uint16(b[8:])),
	}
}

// udpOffsets finds the IP and UDP headers of an Ethernet frame (behind any
// number of 802.1Q/802.1ad tags): IPv4 of any valid header length (IHL 5
// to 15, all of it in f), or IPv6 with UDP as its next header. ok is false
// for anything else.
func udpOffsets(f []byte) (ip, udp int, v6, ok bool) {
	off := 12
	for off+4 <= len(f) && (f[off] == 0x81 && f[off+1] == 0x00 || f[off] == 0x88 && f[off+1] == 0xa8) {
		off += 4
	}
	if off+2 > len(f) {
		return 0, 0, false, false
	}
	et := binary.BigEndian.Uint16(f[off:])
	ip = off + 2
	switch {
	case et == 0x0800 && ip+20 <= len(f) && f[ip]>>4 == 4 && f[ip+9] == 17:
		ihl := int(f[ip]&0xf) * 4
		if ihl < 20 {
			return 0, 0, false, false
		}
		udp = ip + ihl
	case et == 0x86dd && ip+40 <= len(f) && f[ip]>>4 == 6 && f[ip+6] == 17:
		udp, v6 = ip+40, true
	default:
		return 0, 0, false, false
	}
	return ip, udp, v6, udp+8 <= len(f)
}

// splitUDPGSO cuts a UDP GSO super-frame f (length bytes on the wire, of
// which f holds the first len(f)) into the frames it leaves as, each cut
// to snap bytes, and calls emit with each frame and its length on the
// wire. It returns false, having emitted nothing, when f is not a UDP
// super-frame it can cut (see gsoUndescribed).
func splitUDPGSO(f []byte, length, gsoSize, snap int, scratch []byte, emit func(frame []byte, length int) error) (bool, error) {
	ip, udp, v6, ok := udpOffsets(f)
	if !ok || gsoSize <= 0 || length <= udp+8+gsoSize {
		return false, nil
	}
	hdrs := udp + 8
	ipID := uint16(0)
	if !v6 {
		ipID = binary.BigEndian.Uint16(f[ip+4:])
	}
	for i, at := 0, hdrs; at < length; i, at = i+1, at+gsoSize {
		n := min(gsoSize, length-at) // this datagram's payload on the wire
		seg := append(scratch[:0], f[:hdrs]...)
		have := max(0, min(n, len(f)-at))
		if have > 0 {
			seg = append(seg, f[at:at+have]...)
		}
		udpLen := 8 + n
		binary.BigEndian.PutUint16(seg[udp+4:], uint16(udpLen))
		if v6 {
			binary.BigEndian.PutUint16(seg[ip+4:], uint16(udpLen))
		} else {
			// As the kernel's segmentation does: each datagram its own ID.
			binary.BigEndian.PutUint16(seg[ip+2:], uint16(udp-ip+udpLen))
			binary.BigEndian.PutUint16(seg[ip+4:], ipID+uint16(i))
			seg[ip+10], seg[ip+11] = 0, 0
			binary.BigEndian.PutUint16(seg[ip+10:], switching.Checksum(seg[ip:udp], 0))
		}
		if have == n { // whole: the checksum the wire carries
			binary.BigEndian.PutUint16(seg[udp+6:], udpChecksum(seg, ip, udp, v6))
		}
		wire := hdrs + n
		if len(seg) > snap {
			seg = seg[:snap]
		}
		if err := emit(seg, wire); err != nil {
			return true, err
		}
	}
	return true, nil
}

// gsoUndescribed reports whether a frame the kernel marked as a UDP GSO
// super-frame is one splitUDPGSO cannot cut and that cannot be written as
// it is either: headers it cannot find (an IPv4 header length below 5 or
// past the frame, not UDP) or no gso_size. One that fits in a single
// datagram is not undescribed: it is written whole.
func gsoUndescribed(f []byte, gsoSize int) bool {
	_, _, _, ok := udpOffsets(f)
	return !ok || gsoSize <= 0
}

// udpChecksum is the UDP checksum of the datagram at seg[udp:] under its
// IP pseudo-header; a sum of 0 goes out as 0xffff (RFC 768).
func udpChecksum(seg []byte, ip, udp int, v6 bool) uint16 {
	u := seg[udp:]
	u[6], u[7] = 0, 0
	var pseudo uint32
	if v6 {
		pseudo = sumWords(seg[ip+8:ip+40]) + 17 + uint32(len(u))
	} else {
		pseudo = sumWords(seg[ip+12:ip+20]) + 17 + uint32(len(u))
	}
	c := switching.Checksum(u, pseudo)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// finishChecksum fills in a checksum the sender left partial for the NIC
// (VIRTIO_NET_HDR_F_NEEDS_CSUM): the field at start+offset holds the
// pseudo-header's sum, and the sum from start to the end completes it.
// start counts from the frame as the kernel passed it; shift is what was
// put in front of it since (a VLAN tag put back).
func finishChecksum(f []byte, h vnetHdr, shift int) {
	start := h.csumStart + shift
	at := start + h.csumOffset
	if h.flags&vnetNeedsCsum == 0 || start < 0 || at+2 > len(f) || start > len(f) {
		return
	}
	c := switching.Checksum(f[start:], 0)
	if c == 0 && h.csumOffset == 6 { // UDP's field: 0 means "no checksum"
		c = 0xffff
	}
	binary.BigEndian.PutUint16(f[at:], c)
}

// sumWords is the one's complement sum of b's 16-bit big-endian words,
// unfolded.
func sumWords(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	return s
}
