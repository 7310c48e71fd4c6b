package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/internal/app/fabricbench"
)

var benchFabricFlags struct {
	rtt      time.Duration
	gbit     float64
	tags     int
	mrrs     int
	sizes    string
	model    string
	bridge   bool
	jsonOut  bool
	simBytes uint64
	clock    string
	loss     float64
}

var benchFabricCmd = &cobra.Command{
	Use:   "fabric",
	Short: "GPU disaggregation microbenchmarks on the emulated path, native against fabric (virtual time)",
	Long: `bench fabric measures, on the emulated host and GPU in virtual time, what a GPU
disaggregation paper reports: MMIO read latency, host-to-device and device-to-host
bandwidth by copy size (timed by GPU events around the copy, as CUDA's bandwidthTest
does), and the latency of an empty kernel launch followed by a stream synchronization,
each natively (GPU on the host's root port) and over the fabric at --rtt.`,
	Example: `  dxpu bench fabric --rtt 5us --json
  dxpu bench fabric --rtt 20us --tags 256 --sizes 64K,1M,16M`,
	Args: cobra.NoArgs,
	RunE: runBenchFabric,
}

func init() {
	f := benchFabricCmd.Flags()
	fl := &benchFabricFlags
	f.DurationVar(&fl.rtt, "rtt", 5*time.Microsecond, "network round trip between the host-side and GPU-side bridges")
	f.Float64Var(&fl.gbit, "gbit", 100, "fabric rate of the host-GPU pair in Gbit/s")
	f.IntVar(&fl.tags, "tags", 768, "outstanding DMA reads: 256 (8-bit tags) or 768 (10-bit tags), or any smaller cap")
	f.IntVar(&fl.mrrs, "mrrs", 512, "max read request size in bytes (128..4096)")
	f.StringVar(&fl.sizes, "sizes", "4K,64K,1M,16M,64M", "copy sizes, comma-separated (K, M suffixes)")
	f.StringVar(&fl.model, "gpu", "h100", "GPU model: h100 or a100")
	f.BoolVar(&fl.bridge, "bridge", false, "put a real dxpu bridge pair on the fabric path instead of the latency/bandwidth pipe")
	f.Uint64Var(&fl.simBytes, "tlp-bytes", 4<<20, "bytes of each copy moved as TLPs; the rest moves functionally at the rate reached (0: all)")
	f.BoolVar(&fl.jsonOut, "json", false, "print one JSON object")
	f.Float64Var(&fl.loss, "loss", 0, "frame loss probability on the network (needs --bridge: the bridges retransmit)")
	f.StringVar(&fl.clock, "clock", "virtual", "virtual (simulated time, deterministic) or wall (real time; the fabric is a bridge pair over UDP on loopback, --rtt and --gbit do not apply)")
	benchCmd.AddCommand(benchFabricCmd)
}

type fabricPair struct {
	Native float64 `json:"native"`
	Fabric float64 `json:"fabric"`
}

type fabricCopy struct {
	Bytes      uint64  `json:"bytes"`
	NativeGBps float64 `json:"native_gbps"`
	FabricGBps float64 `json:"fabric_gbps"`
}

type fabricReport struct {
	RTTus        float64      `json:"rtt_us"`
	AddedRTTus   float64      `json:"added_rtt_us"`
	Gbit         float64      `json:"gbit"`
	Tags         int          `json:"tags"`
	MRRS         int          `json:"mrrs"`
	GPU          string       `json:"gpu"`
	Path         string       `json:"path"`
	Loss         float64      `json:"loss,omitempty"`
	MMIOReadUs   fabricPair   `json:"mmio_read_us"`
	LaunchSyncUs fabricPair   `json:"launch_sync_us"`
	DMAReadUs    fabricPair   `json:"dma_read_rtt_us"`
	H2D          []fabricCopy `json:"h2d"`
	D2H          []fabricCopy `json:"d2h"`
	VirtualTime  string       `json:"clock"`
}

func parseSizes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := uint64(1)
		switch {
		case strings.HasSuffix(f, "K"):
			mult, f = 1<<10, strings.TrimSuffix(f, "K")
		case strings.HasSuffix(f, "M"):
			mult, f = 1<<20, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "G"):
			mult, f = 1<<30, strings.TrimSuffix(f, "G")
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil || n == 0 || n*mult > 4<<30 {
			return nil, fmt.Errorf("--sizes: %q is not a size between 1 and 4G", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func runBenchFabric(cmd *cobra.Command, _ []string) error {
	fl := &benchFabricFlags
	sizes, err := parseSizes(fl.sizes)
	if err != nil {
		return exitCodeError{2, err}
	}
	mdl, ok := gpu.ModelByName(fl.model)
	switch {
	case !ok:
		return exitCodeError{2, fmt.Errorf("--gpu %q: want h100 or a100", fl.model)}
	case fl.rtt < 0:
		return exitCodeError{2, fmt.Errorf("--rtt must not be negative")}
	case fl.gbit <= 0:
		return exitCodeError{2, fmt.Errorf("--gbit must be positive")}
	case fl.tags < 1 || fl.tags > 768:
		return exitCodeError{2, fmt.Errorf("--tags %d: want 1..768", fl.tags)}
	case fl.mrrs < 128 || fl.mrrs > 4096 || fl.mrrs&(fl.mrrs-1) != 0:
		return exitCodeError{2, fmt.Errorf("--mrrs %d: want a power of two in 128..4096", fl.mrrs)}
	case fl.loss < 0 || fl.loss >= 1:
		return exitCodeError{2, fmt.Errorf("--loss %v: want 0 <= loss < 1", fl.loss)}
	case fl.loss > 0 && !fl.bridge:
		return exitCodeError{2, fmt.Errorf("--loss needs --bridge: only real bridges recover lost frames")}
	case fl.clock != "virtual" && fl.clock != "wall":
		return exitCodeError{2, fmt.Errorf("--clock %q: want virtual or wall", fl.clock)}
	}
	wall := fl.clock == "wall"
	fab := topo.Fabric{RTT: fl.rtt, BytesPerSec: fl.gbit * 1e9 / 8, Loss: fl.loss}
	setup := func(f *topo.Fabric) fabricbench.Setup {
		return fabricbench.Setup{Fabric: f, Model: mdl, TenBitTags: fl.tags > 256, MaxOutstanding: fl.tags, MRRS: fl.mrrs,
			MaxSimBytes: fl.simBytes, Bridge: fl.bridge, Wall: wall}
	}
	rep := fabricReport{RTTus: float64(fl.rtt) / 1e3, AddedRTTus: float64(fab.AddedRoundTrip()) / 1e3, Gbit: fl.gbit,
		Tags: fl.tags, MRRS: fl.mrrs, GPU: mdl.Name, Path: "pipe", VirtualTime: fl.clock, Loss: fl.loss}
	if fl.bridge {
		rep.Path = "bridge-pair"
	}
	if wall {
		rep.Path = "bridge-pair-udp-loopback"
		rep.RTTus, rep.AddedRTTus = 0, 0
	}
	var envs [2]*fabricbench.Env
	for i, f := range []*topo.Fabric{nil, &fab} {
		if envs[i], err = fabricbench.NewEnv(setup(f)); err != nil {
			return exitCodeError{1, err}
		}
		defer envs[i].Close()
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var vals [2][3]time.Duration
	for i, e := range envs {
		if vals[i][0], err = e.MMIOReadLatency(20); err != nil {
			return exitCodeError{1, err}
		}
		if vals[i][1], err = e.LaunchLatency(20); err != nil {
			return exitCodeError{1, err}
		}
		if vals[i][2], err = e.DMAReadRTT(uint64(fl.mrrs)); err != nil {
			return exitCodeError{1, err}
		}
	}
	rep.MMIOReadUs = fabricPair{us(vals[0][0]), us(vals[1][0])}
	rep.LaunchSyncUs = fabricPair{us(vals[0][1]), us(vals[1][1])}
	rep.DMAReadUs = fabricPair{us(vals[0][2]), us(vals[1][2])}
	for _, dir := range []fabricbench.Direction{fabricbench.H2D, fabricbench.D2H} {
		for _, n := range sizes {
			var r [2]float64
			for i, e := range envs {
				if r[i], _, err = e.CopyBandwidth(dir, n); err != nil {
					return exitCodeError{1, err}
				}
			}
			c := fabricCopy{Bytes: n, NativeGBps: r[0] / 1e9, FabricGBps: r[1] / 1e9}
			if dir == fabricbench.H2D {
				rep.H2D = append(rep.H2D, c)
			} else {
				rep.D2H = append(rep.D2H, c)
			}
		}
	}
	out := cmd.OutOrStdout()
	if fl.jsonOut {
		return json.NewEncoder(out).Encode(rep)
	}
	if wall {
		fmt.Fprintf(out, "emulated %s on the wall clock, fabric: a dxpu bridge pair over UDP loopback, %d tags, MRRS %d\n\n", mdl.Name, fl.tags, fl.mrrs)
	} else {
		fmt.Fprintf(out, "emulated %s, fabric: network RTT %v (adds %.1fus to a round trip), %.0f Gbit/s, %d tags, MRRS %d, %s path, loss %.2g; virtual time\n\n",
			mdl.Name, fl.rtt, rep.AddedRTTus, fl.gbit, fl.tags, fl.mrrs, rep.Path, fl.loss)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tnative\tfabric\t")
	fmt.Fprintf(tw, "MMIO read\t%.2fus\t%.2fus\t\n", rep.MMIOReadUs.Native, rep.MMIOReadUs.Fabric)
	fmt.Fprintf(tw, "empty launch + sync\t%.2fus\t%.2fus\t\n", rep.LaunchSyncUs.Native, rep.LaunchSyncUs.Fabric)
	fmt.Fprintf(tw, "DMA read (%d B)\t%.2fus\t%.2fus\t\n", fl.mrrs, rep.DMAReadUs.Native, rep.DMAReadUs.Fabric)
	for _, c := range rep.H2D {
		fmt.Fprintf(tw, "H2D %s\t%.2f GB/s\t%.2f GB/s\t\n", sizeName(c.Bytes), c.NativeGBps, c.FabricGBps)
	}
	for _, c := range rep.D2H {
		fmt.Fprintf(tw, "D2H %s\t%.2f GB/s\t%.2f GB/s\t\n", sizeName(c.Bytes), c.NativeGBps, c.FabricGBps)
	}
	return tw.Flush()
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
