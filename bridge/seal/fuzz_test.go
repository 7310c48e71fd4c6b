package seal_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// genuine holds the only frames the fuzzed receiver may accept: what a
// fresh host-side channel with the test key and boot ID seals. It must be
// deterministic: under -fuzz the seeds are built in one process and run
// in others, and a random boot ID made the genuine HELLO a stranger there
// (CI's fuzz stage: "accepted a frame Seal never produced", seed#12).
var genuine = sync.OnceValue(func() [][]byte {
	host, _, err := newPair(seal.ModeGCM, func(c *seal.Config) {
		if c.Role == encap.RoleHost {
			c.Rand = bootRand()
		}
	})
	if err != nil {
		panic(err)
	}
	var out [][]byte
	for i, body := range [][]byte{nil, {1}, make([]byte, 14), bytes.Repeat([]byte{0xa5}, 300)} {
		f, err := host.Seal(nil, plainFrame(encap.MsgTLP, uint32(i), body))
		if err != nil {
			panic(err)
		}
		out = append(out, f)
	}
	f, err := host.SealHandshake(nil, helloFrame(encap.CtlHello), 1<<40)
	if err != nil {
		panic(err)
	}
	return append(out, f)
})

// FuzzOpen: Open on arbitrary bytes never panics and accepts nothing but
// a frame Seal produced with the key.
func FuzzOpen(f *testing.F) {
	for _, g := range genuine() {
		f.Add(g)
		bad := bytes.Clone(g)
		bad[len(bad)/2] ^= 0x40
		f.Add(bad)
		f.Add(g[:len(g)-1])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, gpu := pair(t, seal.ModeGCM, nil)
		frame := bytes.Clone(data)
		body, err := gpu.Open(frame)
		if err != nil {
			if body != nil {
				t.Fatalf("refused with a body: %v", err)
			}
			return
		}
		n := encap.HeaderLen + encap.Header(data).BodyLen()
		for _, g := range genuine() {
			if bytes.Equal(data[:n], g) {
				return
			}
		}
		t.Fatalf("accepted a frame Seal never produced: %x", data)
	})
}

// FuzzRoundTrip: any header and body seal, open back to the same frame,
// and with any one byte changed do not open.
func FuzzRoundTrip(f *testing.F) {
	f.Add(make([]byte, 40), []byte("body"), false, uint16(3))
	f.Add(bytes.Repeat([]byte{0xff}, 40), []byte{}, true, uint16(60))
	f.Add([]byte{0x17, 3, 1, 2, 3}, make([]byte, 1500), false, uint16(1000))
	f.Fuzz(func(t *testing.T, hdr, body []byte, gmac bool, flip uint16) {
		m := seal.ModeGCM
		if gmac {
			m = seal.ModeGMAC
		}
		host, gpu := pair(t, m, nil)
		body = body[:min(len(body), seal.MaxBody)]
		plain := make([]byte, encap.HeaderLen, encap.HeaderLen+len(body))
		copy(plain, hdr)
		plain[0] = encap.Version<<4 | plain[0]&0x7 // SEALED clear
		encap.Header(plain).SetBodyLen(len(body))
		plain = append(plain, body...)
		sealed, err := host.Seal(nil, plain)
		if err != nil {
			t.Fatalf("seal: %v", err)
		}
		bad := bytes.Clone(sealed)
		bad[int(flip)%len(bad)] ^= 0x01
		if _, err := gpu.Open(bad); err == nil {
			t.Fatalf("byte %d changed and the frame opened", int(flip)%len(bad))
		}
		got, err := gpu.OpenFrame(sealed)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("round trip changed the frame:\n got %x\nwant %x", got, plain)
		}
	})
}
