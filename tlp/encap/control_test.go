package encap

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The worked example of the control.go comment.
func TestControlHelloExample(t *testing.T) {
	want, _ := hex.DecodeString(strings.ReplaceAll(
		"01 01 01 0a 0a 0b 0c 0d 00 00 00 00 01 00 10 14 "+
			"11 22 33 44 00 40 00 20 00 00 30 00 00 00 04 00 "+
			"00 00 00 40 00 00 00 00", " ", ""))
	c := Control{Type: CtlHello, Role: RoleHost, TagBits: 10, Session: 0x0A0B0C0D,
		Window: 256, MaxTLP: 4116, ISN: 0x11223344, Infinite: 1<<CreditCplH | 1<<CreditCplD}
	c.Credits[CreditPH] = 64
	c.Credits[CreditNPH] = 32
	c.Credits[CreditPD] = 1024
	c.Credits[CreditNPD] = 64
	got := c.AppendTo(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
	back, err := ParseControl(got)
	if err != nil {
		t.Fatal(err)
	}
	if back != c {
		t.Fatalf("round trip: got %+v want %+v", back, c)
	}
}

func TestControlShortTypes(t *testing.T) {
	for _, ty := range []ControlType{CtlKeepalive, CtlKeepaliveAck, CtlReset} {
		c := Control{Type: ty, Role: RoleGPU, Session: 7, PeerSession: 9}
		if ty == CtlReset {
			c.Reason = ResetLinkDown
		} else {
			c.Probe = 42
		}
		b := c.AppendTo(nil)
		if len(b) != ControlLen {
			t.Fatalf("%s: %d bytes", ty, len(b))
		}
		back, err := ParseControl(b)
		if err != nil || back != c {
			t.Fatalf("%s: %+v %v", ty, back, err)
		}
	}
}

func TestControlErrors(t *testing.T) {
	good := (&Control{Type: CtlHello, Role: RoleHost, TagBits: 8, Session: 1, Window: 1, MaxTLP: 16}).AppendTo(nil)
	cases := map[string]func(b []byte) []byte{
		"need at least": func(b []byte) []byte { return b[:5] },
		"byte 0":        func(b []byte) []byte { b[0] = 9; return b },
		"byte 1":        func(b []byte) []byte { b[1] = 2; return b },
		"byte 2":        func(b []byte) []byte { b[2] = 3; return b },
		"byte 3":        func(b []byte) []byte { b[3] = 9; return b },
		"bytes 4-7":     func(b []byte) []byte { b[7] = 0; return b },
		"bytes 12-13":   func(b []byte) []byte { b[13] = 0; return b },
		"bytes 14-15":   func(b []byte) []byte { b[15] = 4; return b },
		"byte 26":       func(b []byte) []byte { b[26] = 0x40; return b },
		"need 40":       func(b []byte) []byte { return b[:30] },
	}
	for want, mut := range cases {
		b := mut(bytes.Clone(good))
		_, err := ParseControl(b)
		if err == nil || !errors.Is(err, ErrControl) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func FuzzParseControl(f *testing.F) {
	f.Add((&Control{Type: CtlHello, Role: RoleHost, TagBits: 8, Session: 1, Window: 1, MaxTLP: 16}).AppendTo(nil))
	f.Add((&Control{Type: CtlReset, Role: RoleGPU, Session: 3, Reason: 1}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseControl(b)
		if err != nil {
			return
		}
		// A parsed message re-encodes to the bytes it came from (the
		// reserved bytes aside, which the encoder zeroes).
		enc := c.AppendTo(nil)
		if len(enc) > len(b) {
			t.Fatalf("encoding longer than input: %d > %d", len(enc), len(b))
		}
		back, err := ParseControl(enc)
		if err != nil || back != c {
			t.Fatalf("re-parse: %+v %v, want %+v", back, err, c)
		}
	})
}
