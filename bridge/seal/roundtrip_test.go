package seal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

func TestRoundTripBothModesBothDirections(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		host, gpu := pair(t, m, nil)
		for i, size := range []int{0, 1, 14, 64, 1500, seal.MaxBody} {
			body := bytes.Repeat([]byte{byte(i + 1), 0x5a}, size/2+1)[:size]
			for _, dir := range []struct{ from, to *seal.Channel }{{host, gpu}, {gpu, host}} {
				plain := plainFrame(encap.MsgTLP, uint32(i), body)
				sealed, err := dir.from.Seal(nil, plain)
				if err != nil {
					t.Fatalf("%v size %d: seal: %v", m, size, err)
				}
				if len(sealed) != len(plain)+seal.Overhead || sealed[0]&seal.FlagSealed == 0 {
					t.Fatalf("%v size %d: sealed %d bytes flags %#x", m, size, len(sealed), sealed[0])
				}
				if encap.Header(sealed).BodyLen() != size+seal.Overhead {
					t.Fatalf("%v: sealed body length %d, want %d", m, encap.Header(sealed).BodyLen(), size+seal.Overhead)
				}
				inClear := bytes.Contains(sealed[encap.HeaderLen:], body)
				if size >= 14 && inClear != (m == seal.ModeGMAC) {
					t.Errorf("%v size %d: body in clear = %v", m, size, inClear)
				}
				got, err := dir.to.OpenFrame(sealed)
				if err != nil {
					t.Fatalf("%v size %d: open: %v", m, size, err)
				}
				if !bytes.Equal(got, plain) {
					t.Fatalf("%v size %d: opened frame differs from the plain one", m, size)
				}
			}
		}
	}
}

func TestHandshakeNeedsNoSession(t *testing.T) {
	t.Parallel()
	host, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM}, 7, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 7, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	hello := helloFrame(encap.CtlHello)
	if _, err := host.Seal(nil, hello); !errors.Is(err, seal.ErrNoSession) {
		t.Fatalf("Seal without a session: %v, want ErrNoSession", err)
	}
	sealed, err := host.SealHandshake(nil, hello, 1000)
	if err != nil {
		t.Fatal(err)
	}
	replay := bytes.Clone(sealed)
	got, err := gpu.OpenFrame(sealed)
	if err != nil || !bytes.Equal(got, hello) {
		t.Fatalf("open HELLO: %v", err)
	}
	if _, err := gpu.Open(replay); !errors.Is(err, seal.ErrReplayed) {
		t.Fatalf("replayed HELLO: %v, want ErrReplayed", err)
	}
	// A KEEPALIVE or a TLP frame never goes under the handshake key.
	for _, f := range [][]byte{helloFrame(encap.CtlKeepalive), plainFrame(encap.MsgTLP, 1, make([]byte, 14))} {
		if _, err := host.SealHandshake(nil, f, 2000); !errors.Is(err, seal.ErrHandshakeType) {
			t.Errorf("SealHandshake type %v: %v, want ErrHandshakeType", encap.Header(f).Type(), err)
		}
	}
	// A restarted sender numbers from its clock: above what it sent before.
	restarted, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM}, 7, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	old, err := restarted.SealHandshake(nil, hello, 999) // clock stepped back: the peer drops it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(old); !errors.Is(err, seal.ErrReplayed) {
		t.Fatalf("HELLO numbered below the last one: %v, want ErrReplayed", err)
	}
	fresh, err := restarted.SealHandshake(nil, hello, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(fresh); err != nil {
		t.Fatalf("HELLO after the restart: %v", err)
	}
}
