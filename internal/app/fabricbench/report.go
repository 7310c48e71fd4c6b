package fabricbench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/model"
)

type Pair struct {
	Native float64 `json:"native"`
	Fabric float64 `json:"fabric"`
}

type Copy struct {
	Bytes      uint64  `json:"bytes"`
	NativeGbps float64 `json:"native_gbps"` // Gbit/s, as every _gbps key
	FabricGbps float64 `json:"fabric_gbps"`
}

type Report struct {
	RTTus        float64 `json:"rtt_us"`
	AddedRTTus   float64 `json:"added_rtt_us"`
	LinkGbps     float64 `json:"link_gbps"`
	Tags         int     `json:"tags"`
	MRRS         int     `json:"mrrs_bytes"`
	GPU          string  `json:"gpu"`
	Path         string  `json:"path"`
	Loss         float64 `json:"loss,omitempty"`
	MMIOReadUs   Pair    `json:"mmio_read_us"`
	LaunchSyncUs Pair    `json:"launch_sync_us"`
	DMAReadUs    Pair    `json:"dma_read_rtt_us"`
	H2D          []Copy  `json:"h2d"`
	D2H          []Copy  `json:"d2h"`
	VirtualTime  string  `json:"clock"`
}

// The bounds of a run that ends: below MinLinkGbps a copy of the largest
// --sizes runs for many hours of virtual time (the bridges' keepalives
// then take real minutes) and at a few bit/s wraps the clock around;
// above MaxBridgeLoss the retransmissions make a run take minutes to hours
// (0.5: about 10 s at the default sizes, 0.8: over 2 minutes).
const (
	MinLinkGbps   = 0.001
	MaxBridgeLoss = 0.5
)

// ReportOptions are `dxpu bench fabric`'s.
type ReportOptions struct {
	RTT      time.Duration // network round trip between the bridges
	Gbit     float64       // fabric rate of the pair
	Tags     int           // outstanding DMA reads (over 256: 10-bit tags)
	MRRS     int           // max read request size
	Sizes    string        // copy sizes, comma-separated, K/M/G suffixes, multiples of 4
	Model    string        // GPU model: h100 or a100
	Bridge   bool          // a real bridge pair on the fabric path
	JSON     bool
	SimBytes uint64  // bytes of each copy moved as TLPs (0: all)
	Clock    string  // virtual or wall
	Loss     float64 // frame loss probability (needs Bridge)
}

// WriteReport measures every figure natively and over the fabric and
// prints them as a table (or JSON) to out. Bad options are
// apperr.ErrUsage; a failed measurement is apperr.ErrFailed.
func WriteReport(o ReportOptions, out io.Writer) error {
	fl := &o
	sizes, err := parseSizes(fl.Sizes)
	if err != nil {
		return apperr.Usage(err)
	}
	mdl, ok := gpu.ModelByName(fl.Model)
	switch {
	case !ok:
		return apperr.Usage(fmt.Errorf("--gpu %q: want h100 or a100", fl.Model))
	case fl.RTT < 0:
		return apperr.Usage(fmt.Errorf("--rtt %s: must not be negative", units.Duration(fl.RTT)))
	case fl.RTT > model.MaxRTT:
		// The bounds of `dxpu model`, which reads this report: a round
		// trip of hours is no fabric, though virtual time would run it.
		return apperr.Usage(fmt.Errorf("--rtt %s: want at most %s", units.Duration(fl.RTT), units.Duration(model.MaxRTT)))
	case !(fl.Gbit >= MinLinkGbps) || fl.Gbit > model.MaxLinkGbps: // !(>=): NaN too
		return apperr.Usage(fmt.Errorf("--link-gbps %g: want a number of Gbit/s from %g up to %d", fl.Gbit, MinLinkGbps, model.MaxLinkGbps))
	case fl.Tags < 1 || fl.Tags > model.MaxTags: // the model's bound, as `dxpu model --tags`
		return apperr.Usage(fmt.Errorf("--tags %d: want 1..%d", fl.Tags, model.MaxTags))
	case fl.MRRS < 128 || fl.MRRS > 4096 || fl.MRRS&(fl.MRRS-1) != 0:
		return apperr.Usage(fmt.Errorf("--mrrs %d: want a power of two in 128..4096", fl.MRRS))
	case !(fl.Loss >= 0 && fl.Loss < 1): // NaN fails too
		return apperr.Usage(fmt.Errorf("--loss %v: want 0 <= loss < 1", fl.Loss))
	case fl.Loss > 0 && !fl.Bridge:
		return apperr.Usage(fmt.Errorf("--loss needs --bridge: only real bridges recover lost frames"))
	case fl.Loss > MaxBridgeLoss:
		return apperr.Usage(fmt.Errorf("--loss %v: want at most %v: above, resending lost frames takes a run minutes to hours", fl.Loss, MaxBridgeLoss))
	case fl.Clock != "virtual" && fl.Clock != "wall":
		return apperr.Usage(fmt.Errorf("--clock %q: want virtual or wall", fl.Clock))
	}
	wall := fl.Clock == "wall"
	fab := topo.Fabric{RTT: fl.RTT, BytesPerSec: fl.Gbit * 1e9 / 8, Loss: fl.Loss}
	setup := func(f *topo.Fabric) Setup {
		return Setup{Fabric: f, Model: mdl, TenBitTags: fl.Tags > 256, MaxOutstanding: fl.Tags, MRRS: fl.MRRS,
			MaxSimBytes: fl.SimBytes, Bridge: fl.Bridge, Wall: wall}
	}
	rep := Report{RTTus: float64(fl.RTT) / 1e3, AddedRTTus: float64(fab.AddedRoundTrip()) / 1e3, LinkGbps: fl.Gbit,
		Tags: fl.Tags, MRRS: fl.MRRS, GPU: mdl.Name, Path: "pipe", VirtualTime: fl.Clock, Loss: fl.Loss}
	if fl.Bridge {
		rep.Path = "bridge-pair"
	}
	if wall {
		rep.Path = "bridge-pair-udp-loopback"
		rep.RTTus, rep.AddedRTTus = 0, 0
	}
	var envs [2]*Env
	for i, f := range []*topo.Fabric{nil, &fab} {
		if envs[i], err = NewEnv(setup(f)); err != nil {
			return apperr.Failed(err)
		}
		defer envs[i].Close()
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var vals [2][3]time.Duration
	for i, e := range envs {
		if vals[i][0], err = e.MMIOReadLatency(20); err != nil {
			return apperr.Failed(err)
		}
		if vals[i][1], err = e.LaunchLatency(20); err != nil {
			return apperr.Failed(err)
		}
		if vals[i][2], err = e.DMAReadRTT(uint64(fl.MRRS)); err != nil {
			return apperr.Failed(err)
		}
	}
	rep.MMIOReadUs = Pair{us(vals[0][0]), us(vals[1][0])}
	rep.LaunchSyncUs = Pair{us(vals[0][1]), us(vals[1][1])}
	rep.DMAReadUs = Pair{us(vals[0][2]), us(vals[1][2])}
	for _, dir := range []Direction{H2D, D2H} {
		for _, n := range sizes {
			var r [2]float64
			for i, e := range envs {
				if r[i], _, err = e.CopyBandwidth(dir, n); err != nil {
					return apperr.Failed(err)
				}
			}
			c := Copy{Bytes: n, NativeGbps: r[0] * 8 / 1e9, FabricGbps: r[1] * 8 / 1e9}
			if dir == H2D {
				rep.H2D = append(rep.H2D, c)
			} else {
				rep.D2H = append(rep.D2H, c)
			}
		}
	}
	if fl.JSON {
		// One result object, indented as every command's (dxpu help units).
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if wall {
		fmt.Fprintf(out, "emulated %s on the wall clock, fabric: a dxpu bridge pair over UDP loopback, %d tags, MRRS %d\n\n", mdl.Name, fl.Tags, fl.MRRS)
	} else {
		fmt.Fprintf(out, "emulated %s, fabric: network RTT %s (adds %.1fus to a round trip), %g Gbit/s, %d tags, MRRS %d, %s path, loss %.2g; virtual time\n\n",
			mdl.Name, units.Duration(fl.RTT), rep.AddedRTTus, fl.Gbit, fl.Tags, fl.MRRS, rep.Path, fl.Loss)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tnative\tfabric\t")
	fmt.Fprintf(tw, "MMIO read\t%.2fus\t%.2fus\t\n", rep.MMIOReadUs.Native, rep.MMIOReadUs.Fabric)
	fmt.Fprintf(tw, "empty launch + sync\t%.2fus\t%.2fus\t\n", rep.LaunchSyncUs.Native, rep.LaunchSyncUs.Fabric)
	fmt.Fprintf(tw, "DMA read (%d B)\t%.2fus\t%.2fus\t\n", fl.MRRS, rep.DMAReadUs.Native, rep.DMAReadUs.Fabric)
	for _, c := range rep.H2D {
		fmt.Fprintf(tw, "H2D %s\t%.1f Gbit/s\t%.1f Gbit/s\t\n", sizeName(c.Bytes), c.NativeGbps, c.FabricGbps)
	}
	for _, c := range rep.D2H {
		fmt.Fprintf(tw, "D2H %s\t%.1f Gbit/s\t%.1f Gbit/s\t\n", sizeName(c.Bytes), c.NativeGbps, c.FabricGbps)
	}
	return tw.Flush()
}

// MaxCopyBytes is the largest --sizes copy (in virtual time only
// SimBytes of it move as TLPs).
const MaxCopyBytes = 4 << 30

// parseSizes reads --sizes as `bench e2e` does (bytesize's K, M, G
// suffixes) and holds each copy to the same rule, a multiple of 4 (the
// GPU's copy engine moves whole DWs), here up to MaxCopyBytes.
func parseSizes(s string) ([]uint64, error) {
	sizes, err := bytesize.ParseList("sizes", s)
	if err != nil {
		return nil, err
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("--sizes %q: empty; leave the flag out for its default", s)
	}
	for _, n := range sizes {
		if n < 4 || n > MaxCopyBytes || n%4 != 0 {
			return nil, fmt.Errorf("--sizes: copy size %s: want a multiple of 4 in 4..4GiB", bytesize.Format(n))
		}
	}
	return sizes, nil
}

func sizeName(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
