package seal_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// docPlain is the plain frame of the package doc's worked example: the
// host side's first TLP frame of the session, one 3DW MRd.
func docPlain() []byte {
	mrd := []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xf0, 0x00, 0x10, 0x00}
	f := make([]byte, encap.HeaderLen, encap.HeaderLen+2+len(mrd))
	h := encap.Header(f)
	h.SetVersionFlags(encap.Version, encap.FlagAck|encap.FlagCredit)
	h.SetType(encap.MsgTLP)
	h.SetPairID(testPair)
	h.SetCount(1)
	h.SetBodyLen(2 + len(mrd))
	h.SetSeq(7)
	h.SetAck(3)
	h.SetCreditLimit(encap.CreditPH, 32, false)
	f = append(f, 0, byte(len(mrd)))
	return append(f, mrd...)
}

// docHex returns the hex bytes of the first indented block of doc.go
// after the line containing marker; on each line, the two-digit hex fields
// before the first other field (the rest is commentary).
func docHex(t *testing.T, marker string) []byte {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	found, inBlock := false, false
	for _, line := range strings.Split(string(src), "\n") {
		if !found {
			found = strings.Contains(line, marker)
			continue
		}
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			if inBlock {
				break
			}
			continue
		}
		inBlock = true
		for _, f := range strings.Fields(code) {
			b, err := hex.DecodeString(f)
			if err != nil || len(f) != 2 {
				break
			}
			out = append(out, b...)
		}
	}
	if out == nil {
		t.Fatalf("doc.go has no hex block after %q", marker)
	}
	return out
}

// TestDocExample checks the worked example in doc.go byte for byte
// against Seal, and that it opens back into the plain frame.
func TestDocExample(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	plain := docPlain()
	if want := docHex(t, "3DW MRd of one DW at 0xf0001000"); !bytes.Equal(plain, want) {
		t.Fatalf("plain frame:\n got %x\nwant %x (doc.go)", plain, want)
	}
	sealed, err := host.Seal(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	if want := docHex(t, "sealed by the host side (epoch 0"); !bytes.Equal(sealed, want) {
		t.Fatalf("sealed frame:\n got % x\nwant % x (doc.go)", sealed, want)
	}
	got, err := gpu.OpenFrame(sealed)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("the example does not open: %v", err)
	}
}

// TestDocHandshakeExample checks the package doc's sealed HELLO (boot ID,
// 20-byte security header, 17-byte nonce) byte for byte against
// SealHandshake, and that the peer opens it.
func TestDocHandshakeExample(t *testing.T) {
	t.Parallel()
	hello := helloFrame(encap.CtlHello)
	if want := docHex(t, "seals a HELLO at"); !bytes.Equal(hello, want) {
		t.Fatalf("plain HELLO:\n got % x\nwant % x (doc.go)", hello, want)
	}
	host, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM, Rand: bootRand()}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := host.SealHandshake(nil, hello, 0x0102030405)
	if err != nil {
		t.Fatal(err)
	}
	if want := docHex(t, "sealed, 88 bytes"); !bytes.Equal(sealed, want) {
		t.Fatalf("sealed HELLO:\n got % x\nwant % x (doc.go)", sealed, want)
	}
	gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := gpu.OpenFrame(sealed); err != nil || !bytes.Equal(got, hello) {
		t.Fatalf("the example does not open: %v", err)
	}
}
