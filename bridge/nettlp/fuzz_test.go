package nettlp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// flatMemory is a plain Memory over [base, base+len(b)) for tests that
// compare whole memories.
type flatMemory struct {
	base uint64
	b    []byte
}

func (m *flatMemory) span(addr uint64, n int) ([]byte, error) {
	if addr < m.base || addr-m.base > uint64(len(m.b)) || uint64(n) > uint64(len(m.b))-(addr-m.base) {
		return nil, fmt.Errorf("%w: [%#x, +%d)", ErrOutOfRange, addr, n)
	}
	return m.b[addr-m.base : addr-m.base+uint64(n)], nil
}

func (m *flatMemory) ReadAt(p []byte, addr uint64) error {
	s, err := m.span(addr, len(p))
	if err == nil {
		copy(p, s)
	}
	return err
}

func (m *flatMemory) WriteAt(p []byte, addr uint64) error {
	s, err := m.span(addr, len(p))
	if err == nil {
		copy(s, p)
	}
	return err
}

const fuzzBase, fuzzSize = 0x4000, 0x4000

// FuzzCompleter throws arbitrary datagrams at the target core. Invariants:
// no panic; every answer is a well-formed completion (tlp.Parse) for the
// request's requester and tag; posted TLPs and completions get no answer,
// non-posted requests with a whole header get one or more; successful
// reads obey the completion rules, carry memory's bytes and reassemble
// under libtlp's arithmetic when libtlp can; writes change memory only
// inside the bytes their byte enables name.
func FuzzCompleter(f *testing.F) {
	var seeds [][]byte
	for _, rc := range []struct {
		addr  uint64
		count int
	}{{0x4000, 4}, {0x4001, 6}, {0x4ffe, 8}, {0x5000, 4096}, {0x4003, 1}, {0x7ff0, 256}, {0x1_0000_4000, 64}, {0x4020, 512}} {
		var b [HeaderLen + 16]byte
		n := putLibtlpRequest(b[:], false, rc.addr, rc.count, 3, tlp.NewID(0x19, 0, 0))
		seeds = append(seeds, bytes.Clone(b[:n]))
		data := bytes.Repeat([]byte{0xa5, 0x5a, 0x11}, rc.count/3+1)[:min(rc.count, 512)]
		seeds = append(seeds, appendLibtlpWrite(nil, rc.addr, data, 7, 0))
	}
	seeds = append(seeds,
		append(make([]byte, HeaderLen), make([]byte, 12)...),                                              // all-zero MRd (capture junk)
		append(make([]byte, HeaderLen), 0xa0, 0, 0x7b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),             // reserved Fmt
		append(make([]byte, HeaderLen), 0x04, 0, 0, 1, 1, 0, 7, 0x0f, 2, 0, 0, 0x10),                      // CfgRd0
		append(make([]byte, HeaderLen), 0x4a, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0, 1, 2, 3, 4),                // CplD
		append(make([]byte, HeaderLen), 0x4c, 0, 0, 1, 0, 0, 1, 0x0f, 0, 0, 0x40, 0x00, 9, 9, 9, 9),       // FetchAdd
		append(make([]byte, HeaderLen), 0x01, 0, 0, 1, 0, 0, 1, 0x0f, 0, 0, 0x40, 0x00),                   // MRdLk
		append(make([]byte, HeaderLen), 0x00, 0x89, 0x30, 0x01, 0, 0, 0xff, 0x0f, 0, 0, 0x40, 0x08),       // MRd with T9/T8, TH
		append(make([]byte, HeaderLen), 0x40, 0, 0x40, 0x01, 0, 0, 0, 0x0f, 0, 0, 0x40, 0x00, 1, 2, 3, 4), // poisoned MWr
		[]byte{1, 2, 3},
	)
	for _, s := range seeds {
		f.Add(s, uint8(1), false)
	}
	f.Fuzz(func(t *testing.T, d []byte, mpsSel uint8, rcb128 bool) {
		cfg := CompleterConfig{MPS: 128 << (mpsSel % 6), RCB: 64, CompleterID: tlp.NewID(0, 0, 0)}
		if rcb128 {
			cfg.RCB = 128
		}
		mem := &flatMemory{base: fuzzBase, b: make([]byte, fuzzSize)}
		for i := range mem.b {
			mem.b[i] = patternByte(uint64(i))
		}
		before := bytes.Clone(mem.b)
		c, err := NewCompleter(cfg, mem, HeaderLen, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, b, err := SplitDatagram(d)
		if err != nil {
			return
		}
		var cpls [][]byte
		herr := c.Handle(b, func(fr []byte) error {
			if len(fr) < HeaderLen {
				t.Fatalf("frame of %d bytes lacks the headroom", len(fr))
			}
			cpls = append(cpls, bytes.Clone(fr[HeaderLen:]))
			return nil
		})
		var kind tlp.Kind
		if len(b) >= 4 {
			kind = tlp.View(b).Kind()
		}
		whole := kind != tlp.KindInvalid && len(b) >= tlp.View(b).HeaderLen()
		switch {
		case whole && kind.IsNonPosted() && len(cpls) == 0:
			t.Fatalf("%v request % x got no completion (err %v)", kind, b, herr)
		case !(whole && kind.IsNonPosted()) && len(cpls) != 0:
			t.Fatalf("%v % x answered with %d completions", kind, b, len(cpls))
		}
		for i, cp := range cpls {
			v, err := tlp.Parse(cp)
			if err != nil {
				t.Fatalf("completion %d malformed: %v\nrequest % x\ncompletion % x", i, err, b, cp)
			}
			if !v.Kind().IsCompletion() {
				t.Fatalf("answer %d is a %v", i, v.Kind())
			}
			if v.RequesterID() != tlp.View(b).RequesterID() || v.Tag() != tlp.View(b).Tag() {
				t.Fatalf("completion %d for %v/%#x, request %v/%#x", i, v.RequesterID(), v.Tag(), tlp.View(b).RequesterID(), tlp.View(b).Tag())
			}
		}
		r, derr := decodeRequest(b)
		if derr == nil && (kind == tlp.MRd || kind == tlp.MRdLk) {
			libtlpCan := kind == tlp.MRd
			if err := checkReadCompletions(cfg, b, cpls, mem); err != nil {
				t.Fatalf("request % x: %v", b, err)
			}
			if libtlpCan && tlp.View(cpls[0]).Status() == tlp.StatusSC && (r.addr&3 == 0 || len(cpls) == 1) && !(r.lengthDW == 1 && r.firstBE == 0) {
				p := make([]byte, r.count)
				received, fin := 0, false
				for i, cp := range cpls {
					received, fin, err = libtlpStep(p, received, append(make([]byte, HeaderLen), cp...))
					if err != nil || fin != (i == len(cpls)-1) {
						t.Fatalf("libtlp step %d: fin %v, %v", i, fin, err)
					}
				}
				want := make([]byte, r.count)
				mem.ReadAt(want, r.addr)
				if received != r.count || !bytes.Equal(p, want) {
					t.Fatalf("libtlp reassembled %d of %d bytes, equal %v", received, r.count, bytes.Equal(p, want))
				}
			}
		}
		// Memory changes only inside a write's enabled bytes.
		lo, hi := uint64(0), uint64(0)
		if derr == nil && kind == tlp.MWr && herr == nil {
			lo, hi = r.addr, r.addr+uint64(r.count)
		}
		for i := range mem.b {
			a := fuzzBase + uint64(i)
			if mem.b[i] != before[i] && (a < lo || a >= hi) {
				t.Fatalf("byte %#x changed by % x (write range [%#x, %#x), err %v)", a, b, lo, hi, herr)
			}
		}
	})
}
