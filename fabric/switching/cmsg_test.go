package switching

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func auxCmsg(status uint32, tci uint16) []byte {
	b := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(auxdata{}))))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_PACKET, unix.PACKET_AUXDATA
	h.SetLen(unix.CmsgLen(int(unsafe.Sizeof(auxdata{}))))
	a := b[unix.CmsgLen(0):]
	binary.NativeEndian.PutUint32(a[0:], status)
	binary.NativeEndian.PutUint16(a[16:], tci)
	return b
}

func TestVLANFromCmsg(t *testing.T) {
	if tci, ok := vlanFromCmsg(auxCmsg(tpStatusVLANValid, 0x6005)); !ok || tci != 0x6005 {
		t.Fatalf("valid tag: %#x %v", tci, ok)
	}
	if _, ok := vlanFromCmsg(auxCmsg(0, 0x6005)); ok {
		t.Fatal("tag reported without TP_STATUS_VLAN_VALID")
	}
}

// FuzzVLANFromCmsg: control messages come from the kernel, but the parser
// must still never read outside the buffer or loop forever.
func FuzzVLANFromCmsg(f *testing.F) {
	f.Add(auxCmsg(tpStatusVLANValid, 7))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tci, ok := vlanFromCmsg(b)
		if !ok && tci != 0 {
			t.Fatalf("tci %#x without a tag", tci)
		}
	})
}
