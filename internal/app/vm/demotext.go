package vm

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/guest"
)

// WriteText prints r for a reader: the guest's PCI functions, how its
// view of config space compares with the GPU model's, the checks, then
// times (s, us) and rates (Gbit/s) as dxpu help units names them.
func (r DemoResult) WriteText(w io.Writer) error {
	path := r.Path
	if r.Loss > 0 {
		path += fmt.Sprintf(", %.3g of the frames lost each way", r.Loss)
	}
	if r.LinkDowns > 0 {
		path += fmt.Sprintf(", the link down %d time(s) during the run", r.LinkDowns)
	}
	fmt.Fprintf(w, "vm demo: %s guest under %s, one emulated GPU over %s\n\n", r.Machine, r.Accel, path)
	return r.writeText(w, true)
}

// writeText prints the guest's view; model says whether r holds the
// comparison with the GPU model (config space, VRAM) that Demo makes.
func (r DemoResult) writeText(w io.Writer, model bool) error {
	fmt.Fprintln(w, "PCI functions the guest sees:")
	for _, f := range r.PCI {
		line := fmt.Sprintf("  %s  %s:%s  class %s", f.BDF, f.Vendor, f.Device, f.Class)
		for _, res := range f.Resources {
			kind := "BAR"
			if res.IO {
				kind = "I/O BAR"
			}
			line += fmt.Sprintf("  %s%d %s (%s)", kind, res.BAR, res.Start, bytesize.Format(res.Size))
		}
		if f.BDF == r.GPU {
			line += "  <- the GPU it drove"
		}
		fmt.Fprintln(w, line)
	}
	if !model {
		fmt.Fprintf(w, "config space: the guest reads %d bytes\n", r.ConfigSize)
	} else if len(r.ConfigDiff) == 0 {
		fmt.Fprintf(w, "config space: the %d bytes the guest reads equal the GPU model's\n", r.ConfigSize)
	} else {
		fmt.Fprintf(w, "config space: of the %d bytes the guest reads, DWORDs at %s differ from the GPU model's\n",
			r.ConfigSize, strings.Join(r.ConfigDiff, ", "))
	}
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "FAILED"
	}
	fmt.Fprintln(w, "\nchecks:")
	if model {
		fmt.Fprintf(w, "  %-30s %s (%s; CRC-32C %s sent, %s in VRAM)\n", "host-to-device copy", ok(r.H2DOK), bytesize.Format(r.Bytes), r.SrcCRC32C, r.VRAMCRC32C)
	} else {
		fmt.Fprintf(w, "  %-30s %s (%s)\n", "host-to-device copy", ok(r.H2DOK), bytesize.Format(r.Bytes))
	}
	fmt.Fprintf(w, "  %-30s %s\n", "device-to-host copy", ok(r.D2HOK))
	fmt.Fprintf(w, "  %-30s %s\n", "kernel launch and sync", ok(r.LaunchSyncOK))
	fmt.Fprintln(w, "\nmeasured:")
	fmt.Fprintf(w, "  %-30s %8.2f s\n", "boot (QEMU start to /init)", r.BootS)
	fmt.Fprintf(w, "  %-30s %8.2f s\n", "QEMU start to the report", r.ResultS)
	fmt.Fprintf(w, "  %-30s %8.1f us\n", "MMIO read of BOOT_0 (mean)", r.MMIOReadUS)
	fmt.Fprintf(w, "  %-30s %8.1f us\n", "MMIO read of SCRATCH (mean)", r.MMIOScratchUS)
	fmt.Fprintf(w, "  %-30s %8.2f Gbit/s\n", "host-to-device copy", r.H2DGbps)
	fmt.Fprintf(w, "  %-30s %8.2f Gbit/s\n", "device-to-host copy", r.D2HGbps)
	if s := r.Switch; s != nil {
		fmt.Fprintf(w, "\nthe switch forwarded: %d frames (%d bytes) to the GPU, %d frames (%d bytes) to the host\n",
			s.ToGPUFrames, s.ToGPUBytes, s.ToHostFrames, s.ToHostBytes)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
	return nil
}

// WriteRunText prints what `dxpu vm run` got from the guest tool: its
// PCI functions, the checks and the figures, as Demo's WriteText does.
func WriteRunText(w io.Writer, rep guest.Report, tm Timing) error {
	r := DemoResult{BootS: tm.BootS, ResultS: tm.ResultS, H2DOK: rep.H2DOK}
	r.fromGuest(rep)
	fmt.Fprintf(w, "vm run: the guest tool drove %s\n\n", cmp.Or(rep.GPU, "no GPU"))
	if err := r.writeText(w, false); err != nil {
		return err
	}
	if rep.Removed {
		fmt.Fprintln(w, "the GPU left the guest's PCI bus after the work")
	}
	return nil
}
