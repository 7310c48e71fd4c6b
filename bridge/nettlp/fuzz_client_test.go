package nettlp

import (
	"errors"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// FuzzLibtlpStep feeds the client's read loop an arbitrary completion
// datagram (what the peer, or anything that reaches the client's port,
// sent) for a read of n bytes of which received are done. Invariants: no
// panic; the count never goes back and never passes the read's size; a
// refusal wraps ErrBadCompletion and is one non-empty line.
func FuzzLibtlpStep(f *testing.F) {
	req := tlp.NewID(0x19, 0, 0)
	for _, c := range []struct {
		n, bc int
		lower uint8
		data  int
	}{{64, 64, 0, 64}, {6, 6, 1, 8}, {512, 512, 0, 256}, {8, 8, 3, 12}, {4096, 4096, 0, 128}} {
		p := tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(0, 0, 0), RequesterID: req, Tag: 3,
			ByteCount: uint16(c.bc), LowerAddress: c.lower, Data: make([]byte, c.data)}
		b, err := p.AppendTo(make([]byte, HeaderLen))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint16(c.n), uint16(0), b)
	}
	f.Add(uint16(32), uint16(0), append(make([]byte, HeaderLen), 0x0a, 0, 0, 0, 0, 0, 0x20, 4, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, size, done uint16, d []byte) {
		n := int(size%4096) + 1
		received := int(done) % (n + 1)
		p := make([]byte, n)
		r, _, err := libtlpStep(p, received, d)
		if r < received || r > n {
			t.Fatalf("read of %d bytes, %d done: now %d", n, received, r)
		}
		if err != nil {
			msg := err.Error()
			if !errors.Is(err, ErrBadCompletion) || msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q (%T)", msg, err)
			}
		}
	})
}
