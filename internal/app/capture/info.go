package capture

import (
	"errors"
	"fmt"
	"io"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// Info prints a tally per capture to stdout, a block of lines or (asJSON)
// a JSON object: indented for one capture, as every command's one result
// object, and one a line (JSON lines) for several. Frames that do not
// parse are reported on stderr. Any such frame makes the error
// apperr.ErrFailed; unreadable captures are plain errors. Frames the
// snap length cut before the end of their headers are counted apart
// (snaplen_cut_frames), neither reported nor failing.
func Info(paths []string, udpPort uint16, asJSON bool, stdout, stderr io.Writer) error {
	bad := 0
	errs := &errLines{w: stderr}
	defer errs.close("frames that did not parse")
	// Every capture is read before anything is printed: a capture that
	// cannot be read fails the command with no report on stdout.
	tallies := make([]map[string]int, len(paths))
	for i, path := range paths {
		s, err := Tally(path, &encap.Config{UDPPort: udpPort}, errs)
		if err != nil {
			return failedIfLinkType(err)
		}
		bad += s["bad"]
		tallies[i] = s
	}
	for i, path := range paths {
		if err := writeInfo(stdout, path, tallies[i], asJSON, len(paths) == 1); err != nil {
			return err
		}
	}
	if bad > 0 {
		return apperr.Failed(fmt.Errorf("%d frames did not parse", bad))
	}
	return nil
}

// failedIfLinkType marks a capture of another link type as bad input (exit
// status 1); other errors opening a capture stay as they are.
func failedIfLinkType(err error) error {
	if errors.Is(err, pcapio.ErrLinkType) {
		return apperr.Failed(err)
	}
	return err
}

// Tally counts what a capture holds; frames that do not parse are
// reported on errs (when not nil) with their 1-based number.
func Tally(path string, cfg *encap.Config, errs io.Writer) (map[string]int, error) {
	r, err := pcapio.OpenEthernet(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s := map[string]int{}
	for {
		data, ci, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s["frames"]++
		lay, fcfg, err := walkDxpu(data, cfg)
		if err == nil && sealedFrame(data, lay, s) {
			continue
		}
		f, err := encap.ParseFrame(data, fcfg)
		if err != nil && encap.CutBySnaplen(err, ci.CaptureLength, ci.Length) {
			s["snaplen-cut"]++
			continue
		}
		if err != nil {
			s["bad"]++
			if errs != nil {
				fmt.Fprintf(errs, "%s frame %d: %v\n", path, s["frames"], err)
			}
			continue
		}
		s["encap:"+f.Encap().String()]++
		if f.NumVLANs() > 0 {
			s["vlan-tagged"]++
		}
		if h := f.Header(); h != nil && h.Type() != encap.MsgTLP {
			s["msg:"+h.Type().String()]++
		}
		for i := 0; i < f.NumTLPs(); i++ {
			b, tr := f.TLP(i)
			if tr {
				s["truncated"]++
			}
			if len(b) >= 4 {
				s["kind:"+tlp.View(b).Kind().String()]++
			}
		}
	}
}

// sealedFrame counts a sealed dxpu frame (flag SEALED: its body is the
// seal's, not TLPs, so ParseFrame would call it bad) by encapsulation and
// message type under "sealed", and reports whether it was one; lay is how
// it walked. Its TLPs are counted only after `dxpu pcap unseal`.
func sealedFrame(data []byte, lay encap.Layers, s map[string]int) bool {
	if (lay.Encap != encap.EncapDxpuEth && lay.Encap != encap.EncapDxpuUDP) || len(data) < lay.Payload+encap.HeaderLen {
		return false
	}
	if !seal.Sealed(data[lay.Payload:]) {
		return false
	}
	h := encap.Header(data[lay.Payload:])
	s["sealed"]++
	s["encap:"+lay.Encap.String()]++
	if lay.Tags > 0 {
		s["vlan-tagged"]++
	}
	if h.Type() != encap.MsgTLP {
		s["msg:"+h.Type().String()]++
	}
	return true
}
