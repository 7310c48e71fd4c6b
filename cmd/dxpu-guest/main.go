// Command dxpu-guest runs inside a Linux guest (or on any Linux host) that
// borrows a remote GPU: it lists PCI functions as `lspci -nn` does, and
// drives the GPU with dxpu's driver through sysfs, printing JSON. Build it
// static (CGO_ENABLED=0): it runs from an initramfs with nothing else.
//
//	dxpu-guest list                 PCI functions, JSON
//	dxpu-guest config BDF           a function's config space as sysfs gives it, hex
//	dxpu-guest run [flags]          find the GPU, copy, launch, measure: one JSON object
//	dxpu-guest run --watch          report functions as they come and go (events), until interrupted
//
// See package internal/guest for the report's fields.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/dxpu/dxpu/internal/guest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: dxpu-guest list | config BDF | run [flags]")
		return 2
	}
	root := guest.SysfsPCI
	if r := os.Getenv("DXPU_SYSFS_PCI"); r != "" {
		root = r
	}
	switch args[0] {
	case "list":
		fns, err := guest.List(root)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return printJSON(stdout, stderr, fns)
	case "config":
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: dxpu-guest config BDF")
			return 2
		}
		b, err := guest.ReadConfig(root, args[1])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintln(stdout, hex.EncodeToString(b))
		return 0
	case "run":
		return runGPU(args[1:], root, stdout, stderr)
	}
	fmt.Fprintf(stderr, "dxpu-guest: unknown command %q (list, config, run)\n", args[0])
	return 2
}

func runGPU(args []string, root string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := guest.Options{Root: root}
	fs.StringVar(&o.Vendor, "vendor", "10de", "PCI vendor of the GPU (hex)")
	fs.StringVar(&o.Device, "device", "", "PCI device of the GPU (hex; empty: any)")
	fs.Uint64Var(&o.Bytes, "bytes", guest.DefaultCopyBytes, "size of each copy")
	fs.IntVar(&o.Channel, "channel", 0, "GPFIFO channel")
	fs.DurationVar(&o.Timeout, "timeout", 0, "longest wait for the GPU (default 60s)")
	fs.IntVar(&o.Samples, "samples", 200, "MMIO reads per latency figure")
	fs.DurationVar(&o.WaitDevice, "wait-device", 0, "how long to wait for the GPU to appear (hot-add)")
	fs.DurationVar(&o.WaitRemoval, "wait-removal", 0, "wait this long after the work for the GPU to be removed")
	console := fs.Bool("console", false, "print events and the report between console markers")
	watch := fs.Bool("watch", false, "drive nothing: report PCI functions as they come and go (hot-plug), until interrupted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *watch {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		if err := guest.Watch(ctx, guest.WatchOptions{Root: root, Vendor: o.Vendor, Events: stdout}); err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "dxpu-guest:", err)
			return 1
		}
		return 0
	}
	if *console {
		o.Events = stdout
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := guest.Run(ctx, o)
	if *console {
		fmt.Fprintln(stdout, guest.ResultBegin)
	}
	code := printJSON(stdout, stderr, rep)
	if *console {
		fmt.Fprintln(stdout, guest.ResultEnd)
	}
	if err != nil {
		fmt.Fprintln(stderr, "dxpu-guest:", err)
		return 1
	}
	return code
}

func printJSON(stdout, stderr io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, string(b))
	return 0
}
