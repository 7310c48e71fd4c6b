package nettlp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

type replayCounts struct {
	reads, writes, junk, ours, compared, early int
}

// TestReplayCaptures feeds the requests real NICs and NVMe SSDs sent
// (through a NetTLP adapter) into a Completer shaped like the completer in
// the captures (MPS 256, RCB 64, completer 1b:00.0) and checks every
// completion it sends against the PCIe rules, against libtlp's
// reassembly, and, where the capture holds the completer's own
// completions, header for header against them: same count, order, Length,
// Byte Count, Lower Address, IDs, tag, TC and attributes. Payloads are not
// compared (the 128-byte snap length cuts them, and memory differs).
// Junk frames in the captures (reserved Fmt, all-zero MRd) must be refused
// without a malformed answer.
func TestReplayCaptures(t *testing.T) {
	t.Parallel()
	var total replayCounts
	for _, path := range privtest.NetTLPCaptures(t) {
		name := filepath.Base(path)
		c, err := replayFile(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%-26s reads %3d writes %3d junk %2d; our CplDs %3d, %3d compared with the capture's (%d captured before their request)", name, c.reads, c.writes, c.junk, c.ours, c.compared, c.early)
		total.reads += c.reads
		total.writes += c.writes
		total.junk += c.junk
		total.ours += c.ours
		total.compared += c.compared
	}
	t.Logf("total: reads %d, writes %d, junk %d, our completions %d, %d compared", total.reads, total.writes, total.junk, total.ours, total.compared)
	if total.reads == 0 || total.compared == 0 {
		t.Fatal("captures held no reads with completions to compare")
	}
}

func replayFile(path string) (replayCounts, error) {
	var cnt replayCounts
	r, err := pcapio.Open(path)
	if err != nil {
		return cnt, err
	}
	defer r.Close()
	mem, _ := NewSparseMemory(0, 1<<48, patternByte)
	cfg := CompleterConfig{MPS: 256, RCB: 64, CompleterID: tlp.NewID(0x1b, 0, 0)}
	comp, err := NewCompleter(cfg, mem, 0, nil)
	if err != nil {
		return cnt, err
	}
	pending := map[uint16][][]byte{} // our completions not yet seen in the capture, per tag
	early := map[uint16][][]byte{}   // captured completions seen before their request (capture reordering)
	compare := func(i int, ours, theirs []byte) error {
		if !bytes.Equal(ours[:cplHeaderLen], theirs[:cplHeaderLen]) {
			return fmt.Errorf("frame %d: captured completion header % x, ours % x", i, theirs[:cplHeaderLen], ours[:cplHeaderLen])
		}
		cnt.compared++
		return nil
	}
	for i := 1; ; i++ {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return cnt, fmt.Errorf("frame %d: %w", i, err)
		}
		f, err := encap.ParseFrame(data, &encap.Config{SkipIPv4Checksum: true})
		if err != nil || f.Encap() != encap.EncapNetTLP {
			return cnt, fmt.Errorf("frame %d: not NetTLP: %v", i, err)
		}
		b, truncated := f.TLP(0)
		if f.SrcPort() != f.DstPort() || f.SrcPort() != Port(TLPTag(b)) {
			return cnt, fmt.Errorf("frame %d: ports %#x/%#x for tag %#x", i, f.SrcPort(), f.DstPort(), TLPTag(b))
		}
		v := tlp.View(b)
		kind := tlp.KindInvalid
		if len(b) >= 4 {
			kind = v.Kind()
		}
		switch {
		case kind == tlp.CplD || kind == tlp.Cpl:
			q := pending[v.Tag()]
			if len(q) == 0 {
				if len(early[v.Tag()]) > 4 {
					return cnt, fmt.Errorf("frame %d: captured completions for tag %#x without a request", i, v.Tag())
				}
				early[v.Tag()] = append(early[v.Tag()], bytes.Clone(b))
				cnt.early++
				continue
			}
			pending[v.Tag()] = q[1:]
			if err := compare(i, q[0], b); err != nil {
				return cnt, err
			}
		case kind == tlp.MRd && (len(b) < 12 || v.FirstBE() != 0):
			var cpls [][]byte
			p := make([]byte, v.RequestBytes())
			received, fin := 0, false
			err := comp.Handle(b, func(fr []byte) error {
				cpls = append(cpls, bytes.Clone(fr))
				var err error
				received, fin, err = libtlpStep(p, received, append(make([]byte, HeaderLen), fr...))
				return err
			})
			if err != nil {
				return cnt, fmt.Errorf("frame %d: MRd % x: %w", i, b, err)
			}
			if err := checkReadCompletions(cfg, b, cpls, mem); err != nil {
				return cnt, fmt.Errorf("frame %d: MRd % x: %w", i, b, err)
			}
			if !fin || received != len(p) {
				return cnt, fmt.Errorf("frame %d: libtlp took %d of %d bytes", i, received, len(p))
			}
			cnt.ours += len(cpls)
			for len(cpls) > 0 && len(early[v.Tag()]) > 0 {
				if err := compare(i, cpls[0], early[v.Tag()][0]); err != nil {
					return cnt, err
				}
				cpls, early[v.Tag()] = cpls[1:], early[v.Tag()][1:]
			}
			pending[v.Tag()] = append(pending[v.Tag()], cpls...)
			cnt.reads++
		case kind == tlp.MWr && len(b) >= v.HeaderLen():
			full := b
			if truncated {
				full = append(bytes.Clone(b), make([]byte, v.WireLen()-len(b))...)
			}
			if err := comp.Handle(full, func([]byte) error { return errors.New("completion for a write") }); err != nil {
				return cnt, fmt.Errorf("frame %d: MWr: %w", i, err)
			}
			got := make([]byte, len(b)-v.HeaderLen())
			mem.ReadAt(got, tlp.FirstByteAddress(v.Address(), v.FirstBE()))
			if !bytes.Equal(got, b[v.HeaderLen():]) {
				return cnt, fmt.Errorf("frame %d: captured write data not in memory", i)
			}
			cnt.writes++
		default: // junk: reserved Fmt, all-zero MRd
			err := comp.Handle(b, func(fr []byte) error {
				if _, perr := tlp.Parse(fr); perr != nil {
					return fmt.Errorf("malformed answer to junk: %v", perr)
				}
				if tlp.View(fr).Status() != tlp.StatusUR {
					return errors.New("junk answered with data")
				}
				return nil
			})
			if !errors.Is(err, ErrMalformedRequest) {
				return cnt, fmt.Errorf("frame %d: junk % x: %v", i, b, err)
			}
			cnt.junk++
		}
	}
	for tag, q := range early {
		if len(q) > 0 {
			return cnt, fmt.Errorf("%d captured completions for tag %#x never matched a request", len(q), tag)
		}
	}
	for tag, q := range pending {
		if len(q) > 0 && cnt.compared > 0 {
			return cnt, fmt.Errorf("%d of our completions for tag %#x not in the capture", len(q), tag)
		}
	}
	return cnt, nil
}
