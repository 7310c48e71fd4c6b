package seal

import (
	"errors"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// TestOpenRefusesOtherMessagesUnderHandshakeKey: SealHandshake seals only
// HELLO, HELLO-ACK and RESET; a peer that seals anything else under the
// handshake key is not running this package, and Open refuses it after
// authenticating it. The frames are forged the way SealHandshake seals,
// without its check.
func TestOpenRefusesOtherMessagesUnderHandshakeKey(t *testing.T) {
	t.Parallel()
	for _, m := range []Mode{ModeGCM, ModeGMAC} {
		key := make([]byte, KeyLen)
		host, err := New(Config{PairID: 7, Role: encap.RoleHost, Mode: m}, 1, key)
		if err != nil {
			t.Fatal(err)
		}
		gpu, err := New(Config{PairID: 7, Role: encap.RoleGPU, Mode: m}, 1, key)
		if err != nil {
			t.Fatal(err)
		}
		pn := uint64(100)
		forge := func(typ encap.MsgType, body []byte) []byte {
			f := make([]byte, encap.HeaderLen+len(body))
			h := encap.Header(f)
			h.SetVersionFlags(encap.Version, 0)
			h.SetType(typ)
			h.SetPairID(7)
			h.SetBodyLen(len(body))
			copy(f[encap.HeaderLen:], body)
			pn++
			handshakeNonce(&gpu.hsNonce, gpu.cfg.Role, gpu.boot[:], pn)
			return gpu.sealWith(nil, f, len(body), 0, kindHandshake, 0, byte(gpu.active.gen), pn, gpu.active.hsTx)
		}
		ctl := func(ct encap.ControlType) []byte {
			return []byte{byte(ct), 1, byte(encap.RoleGPU), 0, 0, 0, 0, 1, 0, 0, 0, 0}
		}
		// The forgery is sound: the three handshake messages open.
		for _, ct := range []encap.ControlType{encap.CtlHello, encap.CtlHelloAck, encap.CtlReset} {
			if _, err := host.Open(forge(encap.MsgControl, ctl(ct))); err != nil {
				t.Fatalf("%v: %v: %v", m, ct, err)
			}
		}
		refused := []struct {
			name string
			typ  encap.MsgType
			body []byte
		}{
			{"KEEPALIVE", encap.MsgControl, ctl(encap.CtlKeepalive)},
			{"KEEPALIVE-ACK", encap.MsgControl, ctl(encap.CtlKeepaliveAck)},
			{"control type 0", encap.MsgControl, ctl(0)},
			{"control type 6", encap.MsgControl, ctl(6)},
			{"empty control", encap.MsgControl, nil},
			{"TLP frame with a HELLO body", encap.MsgTLP, ctl(encap.CtlHello)},
			{"ACK", encap.MsgAck, nil},
		}
		for _, c := range refused {
			if _, err := host.Open(forge(c.typ, c.body)); !errors.Is(err, ErrHandshakeType) {
				t.Errorf("%v: %s under the handshake key: %v, want ErrHandshakeType", m, c.name, err)
			}
		}
		if c := host.Counters(); c.HandshakeRefused != uint64(len(refused)) || c.OpenedHandshake != 3 {
			t.Errorf("%v: refused %d opened %d, want %d and 3", m, c.HandshakeRefused, c.OpenedHandshake, len(refused))
		}
	}
}
