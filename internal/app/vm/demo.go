package vm

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/progress"
	"github.com/dxpu/dxpu/internal/guest"
)

// DemoOptions configure Demo.
type DemoOptions struct {
	// VM configures the guest (GPUs and GuestArgs are set by Demo).
	VM Options
	// Bytes is the size of each copy (default 64 MiB).
	Bytes uint64
	// Loss drops that fraction of the pair's frames each way (0 to 1).
	Loss float64
	// Link carries the pair's frames. nil: as root NetnsXDP (through the
	// XDP switch between network namespaces), else or with Loopback set
	// UDP on 127.0.0.1.
	Link     Link
	Loopback bool
	// PowerOffWait bounds the wait for the guest to power off after its
	// report (default 30 s); then QEMU is killed.
	PowerOffWait time.Duration
	// Progress, when a terminal, shows the phase running: boot, the
	// guest tool's copies, power-off (package progress).
	Progress io.Writer
}

// DemoResult is what `dxpu vm demo --json` prints.
type DemoResult struct {
	// PCI lists the functions as the guest sees them; GPU is the one it drove.
	PCI []guest.Function `json:"pci"`
	GPU string           `json:"gpu"`
	// ConfigDiff lists the config-space DWORD offsets where the guest's view
	// differs from the GPU model's, among the ConfigSize bytes the guest
	// could read (see the package doc for the expected ones and why). Keys
	// carry their unit, as dxpu help units says: config_bytes, copy_bytes.
	ConfigDiff []string `json:"config_diff"`
	ConfigSize int      `json:"config_bytes"`
	// H2DOK: the copies completed and the GPU's memory holds the guest's
	// bytes (CRC-32C VRAMCRC32C equals the guest's SrcCRC32C); D2HOK: the
	// guest read back the same bytes; LaunchSyncOK: a kernel launch and its
	// synchronization completed. Bytes is the size of each copy.
	H2DOK        bool   `json:"h2d_ok"`
	D2HOK        bool   `json:"d2h_ok"`
	LaunchSyncOK bool   `json:"launch_sync_ok"`
	Bytes        uint64 `json:"copy_bytes"`
	SrcCRC32C    string `json:"src_crc32c"`
	VRAMCRC32C   string `json:"vram_crc32c"`
	// BootS: QEMU start to the guest's /init; ResultS: to the guest's
	// report.
	BootS   float64 `json:"boot_s"`
	ResultS float64 `json:"result_s"`
	// MMIOReadUS is the mean latency of a BOOT_0 read from the guest (µs);
	// MMIOScratchUS of a SCRATCH read.
	MMIOReadUS    float64 `json:"mmio_read_us"`
	MMIOScratchUS float64 `json:"mmio_scratch_us"`
	H2DGbps       float64 `json:"h2d_gbps"`
	D2HGbps       float64 `json:"d2h_gbps"`
	Accel         string  `json:"accel"`
	Machine       string  `json:"machine"`
	// Path is the way the pair's frames took (Link.Path); Switch what the
	// switch on it forwarded of the pair, where there is one.
	Path   string       `json:"path"`
	Switch *SwitchFlows `json:"switch,omitempty"`
	Loss   float64      `json:"loss,omitempty"`
	// LinkDowns counts the pair's link going down during the run (the
	// host side surprise-removed the GPU each time; writes in flight are
	// lost then, and a failure after one says so).
	LinkDowns uint64 `json:"link_downs"`
	Error     string `json:"error,omitempty"`
}

// Demo boots a guest that borrows one emulated H100 over a bridge pair on
// this machine (o.Link, default loopback UDP), runs the guest tool and
// checks its work against the GPU model. A failed step is in
// DemoResult.Error too.
func Demo(ctx context.Context, o DemoOptions) (DemoResult, error) {
	res := DemoResult{Loss: o.Loss, PCI: []guest.Function{}, ConfigDiff: []string{}}
	if o.Bytes == 0 {
		o.Bytes = guest.DefaultCopyBytes
	}
	if o.PowerOffWait == 0 {
		o.PowerOffWait = 30 * time.Second
	}
	var remote *RemoteGPU
	fail := func(err error) (DemoResult, error) {
		if remote != nil {
			res.LinkDowns = remote.LinkDowns()
			if res.LinkDowns > 0 {
				err = fmt.Errorf("%w; the pair's link went down %d time(s) during the run, and the host side surprise-removed the GPU: what was in flight then was lost", err, res.LinkDowns)
			}
		}
		res.Error = err.Error()
		return res, err
	}
	if err := checkLoss(o.Loss); err != nil {
		return fail(err)
	}
	const pair = 1
	bar := progress.New(o.Progress, 4, "starting the link and the GPU")
	defer bar.Finish()
	link, closeLink, err := o.link(ctx, pair)
	if err != nil {
		return fail(err)
	}
	defer closeLink()
	res.Path = link.Path()
	ht, gt, err := link.Open(pair, o.Loss)
	if err != nil {
		return fail(err)
	}
	emu, err := StartEmulatedGPU(ctx, gt, DefaultBridge(pair), realtime.BridgedGPUConfig{})
	if err != nil {
		ht.Close()
		gt.Close()
		return fail(err)
	}
	defer emu.Stop()
	ecfg := emu.Config()
	remote = &RemoteGPU{Transport: ht, Bridge: DefaultBridge(pair), Device: ecfg.ID, BAR0: ecfg.BAR0,
		BAR0Size: ecfg.GPU.Model.BAR0Size, Log: o.VM.Log}
	o.VM.GPUs = []GPU{remote}
	o.VM.GuestArgs = []string{"--bytes", strconv.FormatUint(o.Bytes, 10)}
	o.VM.Hugepages = GuestHugepages(o.Bytes)
	v, err := Start(ctx, o.VM)
	if err != nil {
		ht.Close()
		return fail(err)
	}
	defer v.Close()
	res.Accel, res.Machine = v.Accel(), v.o.Machine
	bar.Add(1)
	bar.Describe("booting the guest (" + res.Accel + ")")
	_ = v.Booted(ctx) // only for the bar: Result says what went wrong
	bar.Add(1)
	bar.Describe(fmt.Sprintf("guest tool: %s copies, launch, probe", bytesize.Format(o.Bytes)))
	rep, tm, err := v.Result(ctx)
	if err != nil {
		return fail(err)
	}
	res.BootS, res.ResultS = tm.BootS, tm.ResultS
	res.fromGuest(rep)
	bar.Add(1)
	bar.Describe("powering the guest off")
	pctx, cancel := context.WithTimeout(ctx, o.PowerOffWait)
	err = v.Wait(pctx)
	cancel()
	if err != nil {
		return fail(err)
	}
	if err := res.checkModel(emu, rep); err != nil {
		return fail(err)
	}
	if err := res.checkSwitch(ctx, link, pair); err != nil {
		return fail(err)
	}
	if rep.Error != "" {
		return fail(fmt.Errorf("vm: the guest tool failed: %s", rep.Error))
	}
	if !res.H2DOK {
		return fail(fmt.Errorf("vm: the GPU's memory holds CRC-32C %s, the guest sent %s", res.VRAMCRC32C, res.SrcCRC32C))
	}
	res.LinkDowns = remote.LinkDowns()
	return res, nil
}

// link returns the Link the options ask for and what closes it.
func (o *DemoOptions) link(ctx context.Context, pair uint32) (Link, func(), error) {
	if o.Link != nil {
		return o.Link, func() {}, nil
	}
	if o.Loopback || os.Geteuid() != 0 {
		return Loopback{}, func() {}, nil
	}
	l, err := StartNetnsXDP(ctx, []uint32{pair}, o.VM.Log)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (loopback UDP needs no privilege)", err)
	}
	return l, l.Close, nil
}

// forwardCounter is a Link with a switch that counts what it forwarded.
type forwardCounter interface {
	Forwarded(ctx context.Context, pair uint32) (SwitchFlows, error)
}

// checkSwitch reads what the link's switch forwarded of the pair: at
// least the copies' bytes each way when they completed.
func (r *DemoResult) checkSwitch(ctx context.Context, link Link, pair uint32) error {
	fc, ok := link.(forwardCounter)
	if !ok {
		return nil
	}
	f, err := fc.Forwarded(ctx, pair)
	if err != nil {
		return err
	}
	r.Switch = &f
	if r.H2DOK && r.D2HOK && (f.ToGPUBytes < r.Bytes || f.ToHostBytes < r.Bytes) {
		return fmt.Errorf("vm: the switch forwarded %d bytes to the GPU and %d to the host, fewer than the %d-byte copies each way", f.ToGPUBytes, f.ToHostBytes, r.Bytes)
	}
	return nil
}

func (r *DemoResult) fromGuest(rep guest.Report) {
	r.PCI, r.GPU = rep.PCI, rep.GPU
	r.D2HOK, r.LaunchSyncOK = rep.D2HOK, rep.LaunchSyncOK
	r.Bytes, r.SrcCRC32C = rep.Bytes, rep.SrcCRC32C
	r.MMIOReadUS, r.MMIOScratchUS = rep.MMIOReadUS.Boot0, rep.MMIOReadUS.Scratch
	r.H2DGbps, r.D2HGbps = rep.H2DGbps, rep.D2HGbps
	r.ConfigSize = rep.ConfigSize
}

// checkModel compares the guest's view with the GPU model: config space
// and the bytes in VRAM.
func (r *DemoResult) checkModel(emu *EmulatedGPU, rep guest.Report) error {
	cfg, err := hex.DecodeString(rep.Config)
	if err != nil {
		return fmt.Errorf("vm: the guest's config space: %w", err)
	}
	var model [4096]byte
	var vram uint32
	emu.Do(func(g *gpu.GPU) {
		model = g.Cfg.Data
		if rep.H2DOK && rep.Bytes > 0 {
			buf := make([]byte, rep.Bytes)
			g.VRAM.Read(0, buf)
			vram = crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli))
		}
	})
	r.ConfigDiff = ConfigDiff(cfg, model[:])
	if rep.H2DOK {
		r.VRAMCRC32C = fmt.Sprintf("%#08x", vram)
		r.H2DOK = r.VRAMCRC32C == rep.SrcCRC32C
	}
	return nil
}

// ConfigDiff returns the DWORD offsets (hex) where guest's config bytes
// differ from model's, over the bytes the guest has.
func ConfigDiff(guestView, model []byte) []string {
	out := []string{}
	for off := 0; off+4 <= len(guestView) && off+4 <= len(model); off += 4 {
		if [4]byte(guestView[off:off+4]) != [4]byte(model[off:off+4]) {
			out = append(out, fmt.Sprintf("%#x", off))
		}
	}
	return out
}
