package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
)

// WatchOptions configure Watch.
type WatchOptions struct {
	// Root is the sysfs PCI directory (default SysfsPCI).
	Root string
	// Vendor picks the functions whose BOOT_0 is read when they appear
	// (default 10de).
	Vendor string
	// Interval is the time between two looks at the bus (default 20 ms).
	Interval time.Duration
	// Events receives the EventPrefix lines.
	Events io.Writer
}

// Watch reports PCI functions as they come and go until ctx ends, for a
// guest that stays up while GPUs are lent to it and taken away (a host
// under the manager). Events, one line each:
//
//	{"event":"watching","functions":[...Function...]}    what is there at the start
//	{"event":"added","bdf":"0000:01:00.0","vendor":"10de","device":"2330","class":"0302",
//	 "bar0":"0xfe000000","boot0":"0x180000a1"}           a new function, enabled, BOOT_0 read through BAR0
//	{"event":"added",...,"error":"..."}                  it appeared but BOOT_0 could not be read
//	{"event":"removed","bdf":"0000:01:00.0"}             gone from sysfs
//
// BAR0 is mapped only for the one read, so nothing holds the device when
// it is removed. A function that vanishes while it is being listed is
// looked at again next time.
func Watch(ctx context.Context, o WatchOptions) error {
	if o.Root == "" {
		o.Root = SysfsPCI
	}
	if o.Vendor == "" {
		o.Vendor = "10de"
	}
	if o.Interval <= 0 {
		o.Interval = 20 * time.Millisecond
	}
	fns, err := List(o.Root)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(fns))
	for _, f := range fns {
		known[f.BDF] = true
	}
	emit(o.Events, "watching", "functions", fns)
	waiting := map[string]time.Time{} // new functions without their BAR files yet: first seen
	for {
		if err := pause(ctx, o.Interval); err != nil {
			return err
		}
		fns, err := List(o.Root)
		if errors.Is(err, ErrNoDevice) {
			continue // one vanished mid-listing: look again
		}
		if err != nil {
			return err
		}
		now := make(map[string]bool, len(fns))
		seen := make(map[string]time.Time, len(waiting))
		for _, f := range fns {
			if !known[f.BDF] && f.Vendor == o.Vendor && !barFilesReady(o.Root, f) {
				// The kernel makes a function's directory before its
				// resourceN files (a hot-add under load showed the gap):
				// look again, up to barFilesWait, then report the error.
				first, ok := waiting[f.BDF]
				if !ok {
					first = time.Now()
				}
				if time.Since(first) < barFilesWait {
					seen[f.BDF] = first
					continue
				}
			}
			now[f.BDF] = true
			if !known[f.BDF] {
				emit(o.Events, "added", added(o.Root, o.Vendor, f)...)
			}
		}
		waiting = seen
		for bdf := range known {
			if !now[bdf] {
				emit(o.Events, "removed", "bdf", bdf)
			}
		}
		known = now
	}
}

// barFilesWait bounds the wait for a new function's BAR files: the
// kernel makes them right after its directory, so a function without them
// this long is reported as it is (its BAR0 error).
const barFilesWait = 2 * time.Second

// barFilesReady reports whether the resourceN file of each of f's BARs
// that the watcher maps (BAR0) is there.
func barFilesReady(root string, f Function) bool {
	for _, r := range f.Resources {
		if r.BAR == 0 {
			_, err := os.Stat(filepath.Join(root, f.BDF, "resource0"))
			return err == nil
		}
	}
	return true
}

// added describes a new function; for the watched vendor it enables the
// function and reads BOOT_0 (the first MMIO read through the fabric).
func added(root, vendor string, f Function) []any {
	kv := []any{"bdf", f.BDF, "vendor", f.Vendor, "device", f.Device, "class", f.Class}
	for _, r := range f.Resources {
		if r.BAR == 0 {
			kv = append(kv, "bar0", r.Start)
		}
	}
	if f.Vendor != vendor {
		return kv
	}
	boot0, err := readBoot0(root, f.BDF)
	if err != nil {
		return append(kv, "error", err.Error())
	}
	return append(kv, "boot0", fmt.Sprintf("%#08x", boot0))
}

func readBoot0(root, bdf string) (uint32, error) {
	if err := Enable(root, bdf); err != nil {
		return 0, err
	}
	bar, err := MapBAR(root, bdf, 0)
	if err != nil {
		return 0, err
	}
	defer bar.Close()
	v, err := bar.Read32(gpu.RegBoot0)
	if err == nil && v == 0xffff_ffff {
		err = fmt.Errorf("%w: BOOT_0 of %s", ErrDeviceGone, bdf)
	}
	return v, err
}

// emit writes one event line to w (nil: nowhere).
func emit(w io.Writer, name string, kv ...any) {
	if w == nil {
		return
	}
	m := map[string]any{"event": name}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	fmt.Fprintf(w, "%s%s\n", EventPrefix, b)
}
