package seal_test

import (
	"encoding/binary"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// testKey is a fixed pair key: 00 01 02 ... 1f.
func testKey(first byte) []byte {
	k := make([]byte, seal.KeyLen)
	for i := range k {
		k[i] = first + byte(i)
	}
	return k
}

var (
	hostNonce = []byte{0x0a, 0x0b, 0x0c, 0x0d}
	gpuNonce  = []byte{0x11, 0x3c, 0x39, 0xfc}
)

const testPair = 0x123456

// pair builds a host-side and a GPU-side channel in mode m with a started
// session; tweak adjusts both configs.
func pair(t testing.TB, m seal.Mode, tweak func(*seal.Config)) (host, gpu *seal.Channel) {
	t.Helper()
	host, gpu, err := newPair(m, tweak)
	if err != nil {
		t.Fatal(err)
	}
	return host, gpu
}

func newPair(m seal.Mode, tweak func(*seal.Config)) (host, gpu *seal.Channel, err error) {
	hc := seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: m}
	gc := seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: m}
	if tweak != nil {
		tweak(&hc)
		tweak(&gc)
	}
	if host, err = seal.New(hc, 1, testKey(0)); err != nil {
		return nil, nil, err
	}
	if gpu, err = seal.New(gc, 1, testKey(0)); err != nil {
		return nil, nil, err
	}
	if err := host.StartSession(hostNonce, gpuNonce); err != nil {
		return nil, nil, err
	}
	if err := gpu.StartSession(gpuNonce, hostNonce); err != nil {
		return nil, nil, err
	}
	return host, gpu, nil
}

// plainFrame builds a plain dxpu frame of type t with the given body and a
// header whose Seq is seq.
func plainFrame(t encap.MsgType, seq uint32, body []byte) []byte {
	f := make([]byte, encap.HeaderLen+len(body))
	h := encap.Header(f)
	h.SetVersionFlags(encap.Version, encap.FlagAck|encap.FlagCredit)
	h.SetType(t)
	h.SetPairID(testPair)
	h.SetBodyLen(len(body))
	h.SetSeq(seq)
	h.SetAck(0xa07bd747)
	copy(f[encap.HeaderLen:], body)
	return f
}

// helloFrame builds a CONTROL frame whose body starts with control type ct.
func helloFrame(ct encap.ControlType) []byte {
	body := make([]byte, 12)
	body[0], body[1], body[2] = byte(ct), 1, byte(encap.RoleHost)
	binary.BigEndian.PutUint32(body[4:], 0x0a0b0c0d)
	return plainFrame(encap.MsgControl, 0, body)
}
