package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

var tlpCmd = &cobra.Command{
	Use:   "tlp",
	Short: "Decode and encode PCIe TLPs (hex <-> JSON)",
}

var tlpDecodePcap string

var tlpDecodeCmd = &cobra.Command{
	Use:   "decode [HEX...]",
	Short: "Decode TLPs (hex, one per line on stdin, or a capture) to JSON lines",
	Long: `Decode reads TLPs as hex, one per line, from stdin (or from the arguments) and
prints one JSON object per TLP. Blank lines and lines starting with # are
skipped; spaces, tabs, colons, commas, underscores and dashes between the hex
digits are ignored, and each word may carry a 0x prefix ("0x00000001 0x0100050f").

With --pcap FILE it reads a pcap or pcapng capture instead (NetTLP, dxpu over
Ethernet or UDP, with or without VLAN tags) and adds "frame" (1-based index
among all frames), "encap" and "truncated" (the capture's snap length cut
the TLP: the header is decoded and the data present kept). Frames without
TLPs are skipped.

A TLP that does not decode, or that breaks a rule of the PCIe specification,
prints an object with "error" (the message), "rule" (the rule's name), its
"line" or "frame", and the fields that could be read; the rest is still
processed. Exit status: 0 when every TLP decoded, 1 when any did not, 2 for
usage or I/O errors.`,
	RunE: runTLPDecode,
}

var tlpEncodeCmd = &cobra.Command{
	Use:   "encode",
	Short: "Encode TLPs from JSON lines (the decode format) to hex lines",
	Long: `Encode reads one JSON object per line from stdin, in the format that
'dxpu tlp decode' prints, and prints each TLP as lowercase hex on its own line.
The TLP is validated as decode validates it; with td set the ECRC is computed
(and, if the JSON gives "ecrc", checked). A line that does not encode is
reported on stderr with its line number and the rest is still processed.
Exit status: 0 when every line encoded, 1 when any did not, 2 for I/O errors.`,
	Args: cobra.NoArgs,
	RunE: runTLPEncode,
}

func init() {
	tlpDecodeCmd.Flags().StringVar(&tlpDecodePcap, "pcap", "", "read TLPs from this pcap/pcapng capture instead of hex")
	tlpCmd.AddCommand(tlpDecodeCmd, tlpEncodeCmd)
	rootCmd.AddCommand(tlpCmd)
}

// parseHexLine turns one line of hex into bytes; ok=false for lines to skip.
func parseHexLine(line string) (b []byte, ok bool, err error) {
	s := strings.TrimSpace(line)
	if s == "" || strings.HasPrefix(s, "#") {
		return nil, false, nil
	}
	// Separators become spaces so that each word (a DW as tools print
	// them, "0x0100050f") may carry its own 0x prefix.
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\t', ':', '_', '-', ',':
			return ' '
		}
		return r
	}, s)
	var sb strings.Builder
	for _, w := range strings.Fields(s) {
		sb.WriteString(strings.TrimPrefix(strings.TrimPrefix(w, "0x"), "0X"))
	}
	b, err = hex.DecodeString(sb.String())
	if err != nil {
		return nil, true, fmt.Errorf("bad hex: %w", err)
	}
	return b, true, nil
}

// tlpDecoder writes one JSON line per TLP and counts failures.
type tlpDecoder struct {
	w        *bufio.Writer
	buf      []byte
	pkt      tlp.Packet
	total    int
	failures int
}

// emit writes one TLP's object. prefix holds the leading fields (line or
// frame, encap, truncated) without braces.
// A nil prefix on success when onlyOnError: hex lines print "line" only
// with errors.
func (d *tlpDecoder) emit(prefix []byte, raw []byte, lenient, onlyOnError bool) {
	d.total++
	var (
		v         tlp.View
		truncated bool
		err       error
	)
	if lenient {
		v, truncated, err = tlp.ParseTruncated(raw)
	} else {
		v, err = tlp.Parse(raw)
	}
	if err == nil {
		err = d.pkt.Decode(v)
	}
	if err == nil && onlyOnError {
		prefix = nil
	}
	b := append(d.buf[:0], '{')
	b = append(b, prefix...)
	if err != nil {
		d.failures++
		b = appendErrorFields(b, len(prefix) > 0, err)
		b, _ = appendReadable(b, raw)
	} else {
		if len(prefix) > 0 {
			b = append(b, ',')
		}
		if truncated {
			b, _ = tlp.AppendViewJSONFields(b, v)
		} else {
			b = d.pkt.AppendJSONFields(b)
		}
	}
	b = append(b, '}', '\n')
	d.buf = b
	d.w.Write(b)
}

func appendErrorFields(b []byte, comma bool, err error) []byte {
	if comma {
		b = append(b, ',')
	}
	b = append(b, `"error":`...)
	b = strconv.AppendQuote(b, err.Error())
	rule := tlp.RuleOf(err)
	if rule == "" {
		rule = "decode"
	}
	b = append(b, `,"rule":`...)
	return strconv.AppendQuote(b, rule)
}

func appendReadable(b []byte, raw []byte) ([]byte, bool) {
	n := len(b)
	b = append(b, ',')
	b, ok := tlp.AppendViewJSONFields(b, tlp.View(raw))
	if !ok {
		return b[:n], false
	}
	return b, true
}

func runTLPDecode(cmd *cobra.Command, args []string) error {
	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	d := &tlpDecoder{w: out}
	var err error
	switch {
	case tlpDecodePcap != "" && len(args) > 0:
		return fmt.Errorf("give hex TLPs or --pcap, not both")
	case tlpDecodePcap != "":
		err = d.decodePcap(tlpDecodePcap)
	case len(args) > 0:
		err = d.decodeLines(strings.NewReader(strings.Join(args, "\n")))
	default:
		err = d.decodeLines(cmd.InOrStdin())
	}
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return exitCodeError{2, err}
	}
	if d.failures > 0 {
		return exitCodeError{1, fmt.Errorf("tlp decode: %d of %d TLPs did not decode", d.failures, d.total)}
	}
	return nil
}

func (d *tlpDecoder) decodeLines(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var prefix []byte
	for line := 1; sc.Scan(); line++ {
		b, ok, err := parseHexLine(sc.Text())
		if !ok {
			continue
		}
		prefix = append(prefix[:0], `"line":`...)
		prefix = strconv.AppendInt(prefix, int64(line), 10)
		if err != nil {
			d.total++
			d.failures++
			o := append([]byte{'{'}, prefix...)
			o = append(o, `,"error":`...)
			o = strconv.AppendQuote(o, fmt.Sprintf("line %d: %v", line, err))
			o = append(o, `,"rule":"hex"}`+"\n"...)
			d.w.Write(o)
			continue
		}
		d.emit(prefix, b, false, true)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	return nil
}

func (d *tlpDecoder) decodePcap(path string) error {
	r, err := pcapio.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	var prefix []byte
	for frame := 1; ; frame++ {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: frame %d: %w", path, frame, err)
		}
		f, ferr := encap.ParseFrame(data, nil)
		if ferr != nil {
			d.total++
			d.failures++
			o := fmt.Appendf(nil, `{"frame":%d`, frame)
			if f.Encap() != encap.EncapNone {
				o = fmt.Appendf(o, `,"encap":%q`, f.Encap().String())
			}
			o = append(o, `,"error":`...)
			o = strconv.AppendQuote(o, ferr.Error())
			o = append(o, `,"rule":"frame"}`+"\n"...)
			d.w.Write(o)
			continue
		}
		if f.Encap() == encap.EncapNone {
			continue
		}
		for i := 0; i < f.NumTLPs(); i++ {
			b, truncated := f.TLP(i)
			prefix = fmt.Appendf(prefix[:0], `"frame":%d,"encap":%q,"truncated":%t`, frame, f.Encap().String(), truncated)
			d.emit(prefix, b, truncated, false)
		}
	}
}

func runTLPEncode(cmd *cobra.Command, args []string) error {
	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	sc := bufio.NewScanner(cmd.InOrStdin())
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var (
		buf, hx         []byte
		total, failures int
	)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		total++
		var err error
		buf, err = tlp.EncodeJSON(buf[:0], []byte(s))
		if err != nil {
			failures++
			fmt.Fprintf(cmd.ErrOrStderr(), "dxpu tlp encode: line %d: %v\n", line, err)
			continue
		}
		hx = hex.AppendEncode(hx[:0], buf)
		hx = append(hx, '\n')
		out.Write(hx)
	}
	err := sc.Err()
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return exitCodeError{2, err}
	}
	if failures > 0 {
		return exitCodeError{1, fmt.Errorf("tlp encode: %d of %d lines did not encode", failures, total)}
	}
	return nil
}
