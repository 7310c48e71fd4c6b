package vm

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckQEMU: a missing QEMU is ErrQEMUMissing, one without the proxy
// device ErrQEMUTooOld, one listing it passes.
func TestCheckQEMU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := CheckQEMU(ctx, filepath.Join(t.TempDir(), "no-qemu")); !errors.Is(err, ErrQEMUMissing) {
		t.Errorf("missing: %v", err)
	}
	dir := t.TempDir()
	fake := func(name, out string) string {
		p := filepath.Join(dir, name)
		writeExecutable(t, p, []byte("#!/bin/sh\necho '"+out+"'\n"))
		return p
	}
	if _, err := CheckQEMU(ctx, fake("old", `name "pci-testdev", bus PCI`)); !errors.Is(err, ErrQEMUTooOld) {
		t.Errorf("too old: %v", err)
	}
	if p, err := CheckQEMU(ctx, fake("new", `name "x-pci-proxy-dev", bus PCI`)); err != nil || p != filepath.Join(dir, "new") {
		t.Errorf("new: %q %v", p, err)
	}
}

// TestOptionErrors: bad machine, accelerator or memory are refused before
// anything starts.
func TestOptionErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := filepath.Join(dir, "qemu")
	writeExecutable(t, q, []byte("#!/bin/sh\necho '\"x-pci-proxy-dev\"'\n"))
	for _, o := range []Options{
		{QEMU: q, Kernel: "k", GuestTool: "g", Machine: "virt"},
		{QEMU: q, Kernel: "k", GuestTool: "g", Accel: "hvf"},
		{QEMU: q, Kernel: "k", GuestTool: "g", MemoryMB: 64},
		// 64 MiB copies need 130 MiB of hugepages: not in 128 MiB.
		{QEMU: q, Kernel: "k", GuestTool: "g", MemoryMB: 128},
		{QEMU: q, Kernel: "k", GuestTool: "g", Hugepages: 193},
	} {
		if _, err := Start(context.Background(), o); err == nil {
			t.Errorf("%+v started", o)
		}
	}
}

// TestConfigDiff: differing DWORDs are listed by offset over the bytes
// both sides have.
func TestConfigDiff(t *testing.T) {
	t.Parallel()
	a, b := make([]byte, 256), make([]byte, 4096)
	a[0x11], a[0xff] = 1, 2
	got := ConfigDiff(a, b)
	if len(got) != 2 || got[0] != "0x10" || got[1] != "0xfc" {
		t.Fatalf("%v", got)
	}
	if len(ConfigDiff(b[:256], b)) != 0 {
		t.Fatal("equal bytes differ")
	}
}

// TestKernelReservesHugepages: the guest kernel reserves the tool's
// hugepages at boot (hugepages= on its command line), the arena page and
// both copy buffers: reserved when the tool runs, a guest whose memory is
// fragmented by then found 2 of 32 ("asked the kernel for 65 hugepages, 2
// free, need 32").
func TestKernelReservesHugepages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		bytes uint64
		want  int
	}{{64 << 20, 65}, {16 << 20, 17}, {1, 3}, {(2 << 20) + 1, 5}} {
		if got := GuestHugepages(c.bytes); got != c.want {
			t.Errorf("GuestHugepages(%d) = %d, want %d", c.bytes, got, c.want)
		}
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "hugepages=65 "},
		{Options{Hugepages: GuestHugepages(16 << 20)}, "hugepages=17 "},
	} {
		dir := t.TempDir()
		q := filepath.Join(dir, "qemu")
		writeExecutable(t, q, []byte("#!/bin/sh\necho '\"x-pci-proxy-dev\"'\n"))
		o := c.o
		o.QEMU, o.Kernel, o.GuestTool, o.Accel = q, "k", "g", "tcg"
		if err := o.fill(context.Background()); err != nil {
			t.Fatal(err)
		}
		v := &VM{o: o}
		args := strings.Join(v.args("initrd", "qmp"), " ")
		if !strings.Contains(args, c.want) {
			t.Errorf("Hugepages %d: QEMU's arguments %q lack %q", c.o.Hugepages, args, c.want)
		}
		// A slow TCG CPU fails the kernel's IO-APIC timer check and
		// the guest panics at boot (CI, under load).
		if !strings.Contains(args, " no_timer_check") {
			t.Errorf("QEMU's arguments %q lack no_timer_check", args)
		}
	}
}
