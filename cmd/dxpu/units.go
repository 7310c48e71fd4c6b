package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/tlp/encap"
)

// defaultTags is every command's default for outstanding DMA read tags:
// 768, what 10-bit tags allow (PCIe 6.0, and the H100 uses them).
const defaultTags = 768

// unitsHelp is the one place the names and units of all commands are
// written down; `dxpu help units` prints it.
const unitsHelp = `One name and one unit for each quantity, in every command:

  --rtt DURATION      network round trip between the host-side and the GPU-side
                      bridge: cables, switches, NIC pipelines, not the bridges.
                      bench fabric, demo, model, ctl rtt, ctl alloc --max-rtt.
  --added-rtt DURATION
                      what a host-GPU round trip pays over native PCIe: the
                      network round trip plus the bridges' fixed cost (4 x 250 ns
                      of bridge latency and two 150 ns PCIe hops: --rtt 5us is
                      --added-rtt 6.3us). The performance model's own quantity.
  --link-gbps N       link rate of one host-GPU pair in Gbit/s (bench fabric,
                      demo, bench link, model); 0 means no limit where allowed.
  --tags N            outstanding DMA read tags, 1..768: default 768, what
                      10-bit tags (256..1023) allow, everywhere; 256 is the
                      8-bit limit. bench fabric, model.
  --tag-ports N       NetTLP's UDP ports 0x3000.., one per tag a libtlp client
                      uses (1..16). nettlp serve (its old --tags is deprecated:
                      --tags is the DMA read tags above).
  --mrrs N            maximum read request size in bytes.
  --mps N             Max Payload Size: the most data one completion carries,
                      in bytes (128..4096). nettlp serve, bridge and bridge
                      agent (--pcie memory), bench scale.
  --max-payload N     the largest TLP payload a bridge sends and takes, in
                      bytes. bridge, bridge agent.
  --mtu N             the largest dxpu frame from the dxpu header on, in bytes
                      (1472 under a 1500-byte Ethernet MTU over UDP). bridge,
                      bridge agent, conform, bench link, bench scale, bench e2e.
                      At most 65507 over UDP; 9216 on a port shared by pairs
                      (bridge agent, bench link --shared-socket).
  --window N          TLPs in flight per direction: a bridge's retransmit
                      window and the reorder window it offers its peer,
                      1..32768, rounded up to a power of two; 1024. bridge,
                      bridge agent, bench link.
  --credits N         header credits a bridge advertises per flow-control
                      class, its receive buffer in TLPs, 1..32768; 1024,
                      with N x --max-payload / 16 data credits. bridge,
                      bridge agent.
  --ether-mtu N       the largest Ethernet payload of a frame, after the
                      Ethernet header and any VLAN tag, in bytes (1500): the
                      frames pcap generate and pcap convert --pack write,
                      whatever their encapsulation (their old --mtu).
  --cpus LIST         CPUs a daemon's threads run on, in taskset's list format
                      (3, 0-1, 0-1,8); GOMAXPROCS follows. dxpu bridge.
  sizes               every flag that counts bytes (--read-size, --size,
                      --bytes, --mtu, --mps, ...) takes K, M, G suffixes,
                      powers of 1024 (64K, 1M), and 0x hex.
  --target P%         an overhead percentage above 0 and at most 100.

Durations always carry a unit, in Go's syntax: 250ns, 5us, 1.5ms, 2s (flags
read 5µs too; output always writes us).

Every command that reports prints text for people by default and JSON with
--json; nettlp read and write, replay and the daemons print data and logs.

JSON keys are snake_case and carry their unit: _us microseconds, _ns
nanoseconds, _ms milliseconds (timers as configured), _s seconds, _pct
percent, _gbps Gbit/s (never GB/s), _bytes bytes. rtt_us is the network
round trip, added_rtt_us the added one. A report of one object prints it
indented by two spaces; reports of several objects (demo's workloads,
model's traces, pcap info's captures) and streams (ctl events --watch,
ctl table --watch, tlp decode) print JSON lines, one object per line. The
manager's API, and ctl --json, which prints its objects as they are, write
a duration as a string with its unit instead ("rtt": "12us", "max_rtt"),
as its requests take them.

Old spellings still work for a while, with a warning: --gbit and --bw are
--link-gbps (bench fabric, bench link, demo, model), with its plain number
of Gbit/s; --bw also still reads a rate with its unit (100Gbit, 12.5GB/s,
400G). pcap generate's and pcap convert's --mtu is --ether-mtu, the same
number. Give one spelling, not two.`

// newUnitsTopic builds the help topic `dxpu help units`.
func newUnitsTopic() *cobra.Command {
	return &cobra.Command{Use: "units", Short: "Names and units of flags and JSON keys, the same in every command", Long: unitsHelp}
}

// bytesVar defines a flag that is a count of bytes: it takes 4096, 4K
// (K, M, G, T: powers of 1024) or 0x1000, as `dxpu help units` says
// sizes are written, and refuses anything else in one line.
func bytesVar[T ~int | ~uint32 | ~uint64](f *pflag.FlagSet, p *T, name string, def T, usage string) {
	f.Var(bytesize.NewValue(p, def), name, usage)
}

// udpPortVar defines --udp-port, the dxpu UDP port a command reads or
// writes: 1..65535. (0 read as the default, 8855, in some commands and
// was refused in others.)
func udpPortVar(f *pflag.FlagSet, p *uint16, usage string) {
	*p = encap.DefaultUDPPort
	f.Var(&portValue{p: p, want: "want the dxpu UDP port, 1..65535"}, "udp-port", usage)
}

// outUDPPortVar defines pcap unseal's --out-udp-port: a UDP port written
// in place of --udp-port, 1..65535, or 0 (the default) to keep it. As a
// plain uint16 flag it answered 70000 in strconv's words.
func outUDPPortVar(f *pflag.FlagSet, p *uint16, usage string) {
	f.Var(&portValue{p: p, zero: true, want: "want a UDP port, 1..65535, or 0 to keep --udp-port"}, "out-udp-port", usage)
}

// portValue is a UDP port flag refused in the project's words (want),
// not strconv's; 0 is taken only where it means something (zero).
type portValue struct {
	p    *uint16
	zero bool
	want string
}

func (v *portValue) String() string {
	if v.p == nil { // pflag's zero value, for its default check
		return "0"
	}
	return strconv.Itoa(int(*v.p))
}
func (v *portValue) Type() string { return "port" }
func (v *portValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 0, 16)
	if err != nil || n == 0 && !v.zero {
		return errors.New(v.want)
	}
	*v.p = uint16(n)
	return nil
}

// etherMTUVar defines pcap generate's and convert's --ether-mtu, the
// largest Ethernet payload of a frame they write (1500 by default), and
// its old spelling --mtu: everywhere else --mtu is the dxpu frame from
// the dxpu header on (1472 under the same Ethernet MTU over UDP), and a
// capture mixes encapsulations whose dxpu frames differ under one
// Ethernet MTU. Call oneSpelling(f, "ether-mtu", "mtu") in the command.
func etherMTUVar(f *pflag.FlagSet, p *int, usage string) {
	bytesVar(f, p, "ether-mtu", encap.DefaultMTU, usage)
	deprecatedAlias(f, "mtu", "ether-mtu", func() { bytesVar(f, p, "mtu", encap.DefaultMTU, "") })
}

// oneSpelling refuses a flag given under both its name now and its old
// spelling old: the last would silently win.
func oneSpelling(f *pflag.FlagSet, now, old string) error {
	if f.Changed(now) && f.Changed(old) {
		return fmt.Errorf("--%s and --%s: --%s is the old spelling of --%s: give one", now, old, old, now)
	}
	return nil
}

// deprecatedFor is the annotation that marks an old spelling of a flag
// with the name to use now.
const deprecatedFor = "dxpu-deprecated-for"

// deprecatedAlias registers, through register, an old spelling of a flag
// that still works but is hidden; warnDeprecated warns when it is used.
// (pflag's own MarkDeprecated would print on the command's stdout, into
// the JSON a script reads.)
func deprecatedAlias(f *pflag.FlagSet, old, now string, register func()) {
	register()
	fl := f.Lookup(old)
	fl.Hidden = true
	_ = f.SetAnnotation(old, deprecatedFor, []string{now})
}

// warnDeprecated writes one line on w for each old spelling used on the
// command line of cmd.
func warnDeprecated(cmd *cobra.Command, w io.Writer) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if now := f.Annotations[deprecatedFor]; len(now) == 1 {
			fmt.Fprintf(w, "dxpu: --%s is deprecated: use --%s (dxpu help units)\n", f.Name, now[0])
		}
	})
}

// linkRateAliases registers --gbit and --bw, the old spellings of
// --link-gbps, on f: each writes rate, the variable of --link-gbps, so
// they take the same plain number of Gbit/s; --bw also reads a rate with
// its unit, as it once did (100Gbit, 12.5GB/s, 400G). Call it after
// registering --link-gbps, and oneLinkRate in the command.
func linkRateAliases(f *pflag.FlagSet, rate *float64) {
	deprecatedAlias(f, "gbit", "link-gbps", func() { f.Var(gbpsAlias{rate: rate}, "gbit", "") })
	deprecatedAlias(f, "bw", "link-gbps", func() { f.Var(gbpsAlias{rate: rate, withUnit: true}, "bw", "") })
}

// linkRateNames are the spellings of the link rate, the current one first.
var linkRateNames = []string{"link-gbps", "gbit", "bw"}

// errTwoLinkRates is oneLinkRate's refusal: two spellings of one rate
// would silently let the last win.
var errTwoLinkRates = errors.New("one link rate given twice (--gbit and --bw are old spellings of --link-gbps): give one")

// oneLinkRate returns the spelling of the link rate given on the command
// line ("--link-gbps" when none was), for messages, or errTwoLinkRates
// when more than one was.
func oneLinkRate(f *pflag.FlagSet) (string, error) {
	given := ""
	for _, n := range linkRateNames {
		if f.Changed(n) {
			if given != "" {
				return "", fmt.Errorf("%s and --%s: %w", given, n, errTwoLinkRates)
			}
			given = "--" + n
		}
	}
	if given == "" {
		given = "--link-gbps"
	}
	return given, nil
}

// gbpsAlias is the value of an old spelling of --link-gbps: a number of
// Gbit/s, finite and not negative (pflag then names the flag the user
// typed: invalid argument "NaN" for "--gbit" flag: ...); withUnit also
// reads a rate with its unit (model.ParseBandwidth's).
type gbpsAlias struct {
	rate     *float64
	withUnit bool
}

func (v gbpsAlias) String() string {
	if v.rate == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.rate, 'g', -1, 64)
}

func (v gbpsAlias) Type() string { return "float64" }

func (v gbpsAlias) Set(s string) error {
	g, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil && v.withUnit {
		var bytesPerSec float64
		if bytesPerSec, err = model.ParseBandwidth(s); err == nil {
			g = bytesPerSec * 8 / 1e9
		}
	}
	switch {
	case err != nil:
		if v.withUnit {
			return errors.New("want a number of Gbit/s such as 100, or a rate with its unit such as 100Gbit or 12.5GB/s")
		}
		return errors.New("want a number of Gbit/s such as 100")
	case math.IsNaN(g) || math.IsInf(g, 0) || g < 0:
		return errors.New("want a number of Gbit/s, 0 or more")
	}
	*v.rate = g
	return nil
}
