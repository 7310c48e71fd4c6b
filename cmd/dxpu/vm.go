package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/vm"
	"github.com/dxpu/dxpu/internal/guest"
)

// vmFlags are the guest's settings, shared by `vm run` and `vm demo`.
type vmFlags struct {
	o     vm.Options
	bytes uint64
}

func (f *vmFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.o.QEMU, "qemu", "", "qemu-system-x86_64 to run (default: on PATH)")
	fs.StringVar(&f.o.Kernel, "kernel", "", "guest kernel (default: the newest /boot/vmlinuz-*-cloud-amd64)")
	fs.StringVar(&f.o.Busybox, "busybox", "", "static busybox for the initramfs (default /bin/busybox)")
	fs.StringVar(&f.o.GuestTool, "guest-tool", "", "static dxpu-guest binary (default: next to dxpu, else on PATH)")
	fs.StringVar(&f.o.Machine, "machine", "q35", "QEMU machine: q35 (a PCIe root port per GPU slot) or pc")
	fs.IntVar(&f.o.MemoryMB, "memory-mb", 512, "guest RAM in MiB (shared with the GPU servers as a memfd)")
	fs.StringVar(&f.o.Accel, "accel", "", "kvm or tcg (default: KVM when it works here, else TCG)")
	fs.StringVar(&f.o.Dir, "dir", "", "keep the initramfs, QMP socket and serial log here: created 0700 if missing, refused if others may enter it (default: a temporary directory)")
	fs.StringVar(&f.o.SerialLog, "serial-log", "", "write the guest's serial console here (default DIR/serial.log)")
	bytesVar(fs, &f.bytes, "bytes", guest.DefaultCopyBytes, "bytes of each host-to-device and device-to-host copy the guest tool checks")
}

func (f *vmFlags) check() error {
	if f.o.MemoryMB < 128 || f.o.MemoryMB > 64<<10 {
		return exitCodeError{2, fmt.Errorf("--memory-mb %d: want 128..65536", f.o.MemoryMB)}
	}
	if f.o.Machine != "q35" && f.o.Machine != "pc" {
		return exitCodeError{2, fmt.Errorf("--machine %q: want q35 or pc", f.o.Machine)}
	}
	if f.o.Accel != "" && f.o.Accel != "kvm" && f.o.Accel != "tcg" {
		return exitCodeError{2, fmt.Errorf("--accel %q: want kvm or tcg", f.o.Accel)}
	}
	if f.bytes == 0 || f.bytes > uint64(f.o.MemoryMB)<<20/4 {
		return exitCodeError{2, fmt.Errorf("--bytes %d: want 1..a quarter of the guest's RAM", f.bytes)}
	}
	// Before QEMU starts: a kernel it cannot open ended as "QMP
	// qmp_capabilities: ... connection reset by peer".
	for _, p := range []struct{ flag, path string }{{"--kernel", f.o.Kernel}, {"--busybox", f.o.Busybox}} {
		if p.path == "" {
			continue
		}
		if fi, err := os.Stat(p.path); err != nil {
			return exitCodeError{2, fmt.Errorf("%s: %w", p.flag, err)}
		} else if !fi.Mode().IsRegular() {
			return exitCodeError{2, fmt.Errorf("%s %s: not a regular file", p.flag, p.path)}
		}
	}
	return nil
}

// newVMCmd builds `dxpu vm`: a QEMU guest as a host that borrows GPUs.
func newVMCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "Boot a QEMU guest (a real Linux kernel) that borrows remote GPUs through the host-side bridge",
		Long: `vm boots an unmodified Linux guest under QEMU (KVM when it works, else TCG)
whose PCI bus holds one x-pci-proxy-dev per borrowed GPU: QEMU hands the
guest's config and BAR accesses to dxpu's host-side bridge, which turns them
into TLPs toward the GPU and serves the GPU's DMA from the guest's RAM (a
memfd QEMU shares). The guest runs dxpu-guest from an initramfs built on the
fly (busybox-static and dxpu-guest), which finds the GPU in sysfs, maps
BAR0, and drives it with dxpu's GPU driver: copies both ways with checks,
a kernel launch and a synchronization, and a latency/bandwidth probe.

Needs qemu-system-x86 (7.2 or later with x-pci-proxy-dev),
linux-image-cloud-amd64 and busybox-static; dxpu-guest is built next to
dxpu by 'make build'.`,
	}
	cmd.AddCommand(newVMDemoCmd(e), newVMRunCmd(e))
	return cmd
}

func newVMDemoCmd(e *env) *cobra.Command {
	var (
		f                vmFlags
		loss             float64
		asJSON, loopback bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Boot a guest that borrows one emulated H100 over a bridge pair on this machine",
		Long: `demo boots a guest that borrows one emulated H100 over a bridge pair on this
machine (as root through the XDP switch between network namespaces, else or
with --loopback over loopback UDP, no root needed beyond QEMU's), runs the
guest tool and prints what the guest saw: its PCI functions, where its view
of config space differs from the GPU model's, the copies' checks, the
launch and sync, boot time, MMIO read latency, copy rates and the path.`,
		Example: "  dxpu vm demo --json\n  dxpu vm demo --loss 0.01 --bytes 16M",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsProbability(cmd, "loss"); err != nil {
				return exitCodeError{2, err}
			}
			if loss == 1 {
				return exitCodeError{2, fmt.Errorf("--loss %g: want a probability from 0 to below 1 (all frames lost never finishes)", loss)}
			}
			if err := f.check(); err != nil {
				return err
			}
			f.o.Log = e.log
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := vm.Demo(ctx, vm.DemoOptions{VM: f.o, Bytes: f.bytes, Loss: loss, Loopback: loopback, Progress: e.stderr})
			if err != nil { // a failed demo prints its error, not a result
				return exitFor(err, 1)
			}
			if asJSON {
				return exitFor(e.printJSON(res), 1)
			}
			return exitFor(res.WriteText(e.stdout), 1)
		},
	}
	f.add(cmd)
	cmd.Flags().Float64Var(&loss, "loss", 0, "drop this fraction of the pair's frames each way (0 to 1)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&loopback, "loopback", false, "carry the pair over loopback UDP even as root (default as root: network namespaces and the XDP switch)")
	return cmd
}

func newVMRunCmd(e *env) *cobra.Command {
	var (
		f        vmFlags
		gpus     []string
		stayUp   bool
		insecure bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Boot a guest whose GPUs are remote: one host-side bridge per --gpu",
		Long: `run boots a guest with one GPU per --gpu, each a host-side bridge that pairs
with a GPU-side bridge elsewhere (dxpu bridge --role gpu, or a box agent):

  --gpu pair=N,listen=IP:PORT,peer=IP:PORT,key=FILE[,gen=N]

key is the pair key file the GPU side's bridge was given (--key-file there)
and gen its generation (--key-generation there; both default to 1): a side
that sees the other seal under another generation logs "key generation
mismatch". --insecure-no-keys runs every pair unkeyed, for a lab only.
The guest tool's report is printed when it is done, as text or with
--json as one JSON object (a failure prints its error only); with --stay-up the guest keeps running until
interrupted.`,
		Example: `  head -c 32 /dev/urandom > pair1.key && chmod 600 pair1.key
  dxpu bridge --role gpu --pair 1 --listen 127.0.0.1:7001 --peer 127.0.0.1:7002 --pcie emu-gpu --key-file pair1.key &
  dxpu vm run --gpu pair=1,listen=127.0.0.1:7002,peer=127.0.0.1:7001,key=pair1.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if len(gpus) == 0 {
				return exitCodeError{2, fmt.Errorf("give at least one --gpu pair=N,listen=IP:PORT,peer=IP:PORT")}
			}
			for _, g := range gpus {
				rg, err := vm.ParseGPU(g, insecure)
				if err != nil {
					return exitCodeError{2, err}
				}
				rg.Log = e.log
				f.o.GPUs = append(f.o.GPUs, rg)
			}
			f.o.Log, f.o.StayUp = e.log, stayUp
			f.o.GuestArgs = []string{"--bytes", strconv.FormatUint(f.bytes, 10)}
			f.o.Hugepages = vm.GuestHugepages(f.bytes)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, timing, err := vm.Run(ctx, f.o, 30*time.Second)
			if err != nil { // its error (the guest tool's included), not a zero or partial report
				return exitFor(err, 1)
			}
			if !asJSON {
				return exitFor(vm.WriteRunText(e.stdout, rep, timing), 1)
			}
			out := struct {
				Report any `json:"report"`
				Timing any `json:"timing"`
			}{rep, timing}
			return exitFor(e.printJSON(out), 1)
		},
	}
	f.add(cmd)
	cmd.Flags().StringArrayVar(&gpus, "gpu", nil, "a remote GPU: pair=N,listen=IP:PORT,peer=IP:PORT,key=FILE[,gen=N] (repeatable)")
	cmd.Flags().BoolVar(&insecure, "insecure-no-keys", false, "run the pairs unkeyed (lab only: anyone on the fabric can inject TLPs)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (report, timing)")
	cmd.Flags().BoolVar(&stayUp, "stay-up", false, "keep the guest running after its tool is done (until interrupted)")
	return cmd
}
