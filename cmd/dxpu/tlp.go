package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/tlpcodec"
)

// newTLPCmd builds `dxpu tlp decode|encode` (package internal/app/tlpcodec
// does the work).
func newTLPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tlp",
		Short: "Decode and encode PCIe TLPs (hex <-> JSON)",
	}
	var o tlpcodec.Options
	decode := &cobra.Command{
		Use:   "decode [HEX...]",
		Short: "Decode TLPs (hex, one per line on stdin, or a capture) to JSON lines",
		Long: `Decode reads TLPs as hex, one per line, from stdin (or from the arguments) and
prints one JSON object per TLP. Blank lines and lines starting with # are
skipped; spaces, tabs, colons, commas, underscores and dashes between the hex
digits are ignored, and each word may carry a 0x prefix ("0x00000001 0x0100050f").

With --pcap FILE it reads a pcap or pcapng capture instead (NetTLP on UDP
ports 0x3000-0x30ff, dxpu over Ethernet, or dxpu over UDP to or from
--udp-port, with or without VLAN tags) and adds "frame" (1-based index among
all frames), "encap" and "truncated" (the capture's snap length cut the TLP:
the header is decoded and the data present kept). Frames without TLPs are
skipped; a capture with none gets one line on stderr saying so (exit
status 0). Frames that the snap length cut within their headers are
skipped and counted, in one line on stderr naming the first (as 'pcap
info' counts snaplen_cut_frames): they are not frames that did not decode. --udp-port is what 'pcap capture' and 'pcap unseal' were given:
a keyed pair's capture on port 7001, unsealed, decodes with
'dxpu tlp decode --pcap plain.pcap --udp-port 7001'. Sealed frames (a keyed
pair's, not unsealed) are skipped and end the command with one line saying
how to unseal them (exit status 1).

Header bits that PCIe reserves are read as 0 and encoded 0; when the input
sets any, the object gets "reserved_bits": lowercase hex with one byte per
header byte in wire order (24 digits for a 3-DW header, 32 for 4), a bit set
where the input sets a bit that no field holds (absent when there is none).
In the example, the CplD's byte 11 holds the 7-bit Lower Address (8) and,
above it, reserved bit 7: "reserved_bits":"000000000000000000000080" is
byte 11 = 0x80. 'dxpu tlp encode' sets those bits again, so decode | encode
gives the input back byte for byte.

A TLP that does not decode, or that breaks a rule of the PCIe specification,
prints an object with "error" (the message), "rule" (the rule's name), its
"line" or "frame", and the fields that could be read; the rest is still
processed. Exit status: 0 when every TLP decoded, 1 when any did not (or
the capture is not of Ethernet frames), 2 for usage or I/O errors.`,
		Example: `  # A CplD with byte 11 bit 7, above the 7-bit Lower Address, set:
  echo 4a000001000004000100008800000000 | dxpu tlp decode
  # {"kind":"CplD",...,"lower_address":8,"data":"00000000","reserved_bits":"000000000000000000000080"}
  echo 4a000001000004000100008800000000 | dxpu tlp decode | dxpu tlp encode   # the same hex`,
		Args: cobra.ArbitraryArgs, // hex TLPs
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("udp-port") && o.Pcap == "" {
				return exitCodeError{2, errors.New("tlp decode: --udp-port reads a capture's dxpu frames: give it with --pcap")}
			}
			o.Hex = args
			return exitFor(tlpcodec.DecodeWith(o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()), 2)
		},
	}
	decode.Flags().StringVar(&o.Pcap, "pcap", "", "read TLPs from this pcap/pcapng capture instead of hex")
	udpPortVar(decode.Flags(), &o.UDPPort, "dxpu UDP port of the --pcap capture (datagrams to or from it)")
	encode := &cobra.Command{
		Use:   "encode",
		Short: "Encode TLPs from JSON lines (the decode format) to hex lines",
		Long: `Encode reads one JSON object per line from stdin, in the format that
'dxpu tlp decode' prints, and prints each TLP as lowercase hex on its own line.
The TLP is validated as decode validates it; with td set the ECRC is computed
(and, if the JSON gives "ecrc", checked). "reserved_bits", as decode prints
it (hex, one byte per header byte; a shorter mask covers the leading bytes),
is ORed into the header before the ECRC is computed; a mask longer than the
header, or over a bit that a field uses, is refused. A line that does not
encode is reported on stderr with its line number (and column) and the rest
is still processed.
Exit status: 0 when every line encoded, 1 when any did not, 2 for I/O errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitFor(tlpcodec.Encode(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()), 2)
		},
	}
	cmd.AddCommand(decode, encode)
	return cmd
}
