package guest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fakeSysfs writes a sysfs PCI tree with one function per entry.
func fakeSysfs(t *testing.T, fns map[string][4]string) string {
	t.Helper()
	root := t.TempDir()
	for bdf, f := range fns {
		dir := filepath.Join(root, bdf)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"vendor": f[0] + "\n", "device": f[1] + "\n", "class": f[2] + "\n", "resource": f[3]} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

const gpuResource = "0x00000000fc000000 0x00000000fcffffff 0x0000000000040200\n" +
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n" +
	"0x000000000000c040 0x000000000000c05f 0x0000000000040101\n" +
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n" +
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n" +
	"0x0000000000000000 0x0000000000000000 0x0000000000000000\n" +
	"0x00000000fe000000 0x00000000fe03ffff 0x0000000000046200\n"

// TestList: functions are listed sorted, with lspci -nn's IDs and the
// assigned BARs (not the ROM).
func TestList(t *testing.T) {
	t.Parallel()
	root := fakeSysfs(t, map[string][4]string{
		"0000:01:00.0": {"0x10de", "0x2330", "0x030200", gpuResource},
		"0000:00:00.0": {"0x8086", "0x29c0", "0x060000", ""},
	})
	fns, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 2 || fns[0].BDF != "0000:00:00.0" || fns[0].Vendor != "8086" || fns[0].Class != "0600" || len(fns[0].Resources) != 0 {
		t.Fatalf("host bridge %+v", fns)
	}
	g := fns[1]
	if g.Vendor != "10de" || g.Device != "2330" || g.Class != "0302" {
		t.Fatalf("GPU %+v", g)
	}
	want := []Resource{{BAR: 0, Start: "0xfc000000", Size: 16 << 20}, {BAR: 2, Start: "0xc040", Size: 32, IO: true}}
	if len(g.Resources) != 2 || g.Resources[0] != want[0] || g.Resources[1] != want[1] {
		t.Fatalf("resources %+v, want %+v", g.Resources, want)
	}
	if f, err := Find(root, "10de", ""); err != nil || f.BDF != "0000:01:00.0" {
		t.Fatalf("Find: %+v %v", f, err)
	}
	if _, err := Find(root, "1002", ""); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Find of an absent vendor: %v", err)
	}
}

// TestBadSysfs: malformed files are errors naming the file, a missing
// function is ErrNoDevice.
func TestBadSysfs(t *testing.T) {
	t.Parallel()
	for name, f := range map[string][4]string{
		"vendor":   {"nvidia", "0x2330", "0x030200", ""},
		"resource": {"0x10de", "0x2330", "0x030200", "0x1000 0x0fff 0x200\n"},
		"fields":   {"0x10de", "0x2330", "0x030200", "0x1000\n"},
	} {
		root := fakeSysfs(t, map[string][4]string{"0000:01:00.0": f})
		if _, err := List(root); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Describe(t.TempDir(), "0000:09:00.0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("missing function: %v", err)
	}
}

// TestEnable: memory decoding through sysfs `enable` when off, then bus
// mastering through the command register; a function reading all ones is
// ErrDeviceGone.
func TestEnable(t *testing.T) {
	t.Parallel()
	root := fakeSysfs(t, map[string][4]string{"0000:01:00.0": {"0x10de", "0x2330", "0x030200", gpuResource}})
	dir := filepath.Join(root, "0000:01:00.0")
	cfg := make([]byte, 256)
	cfg[4] = 0 // command: nothing enabled
	if err := os.WriteFile(filepath.Join(dir, "config"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "enable"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Enable(root, "0000:01:00.0"); err != nil {
		t.Fatal(err)
	}
	got, _ := ReadConfig(root, "0000:01:00.0")
	en, _ := os.ReadFile(filepath.Join(dir, "enable"))
	if string(en) != "1" || got[4] != CmdMemory|CmdBusMaster {
		t.Fatalf("enable %q, command %#x", en, got[4])
	}
	cfg[4], cfg[5] = 0xff, 0xff
	if err := os.WriteFile(filepath.Join(dir, "config"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Enable(root, "0000:01:00.0"); !errors.Is(err, ErrDeviceGone) {
		t.Fatalf("all-ones command register: %v", err)
	}
}

// TestVanished: a function's files read while the kernel removes it answer
// ENODEV: that is the function gone (ErrNoDevice, which the watcher looks
// past), like its files missing; other errors are not.
func TestVanished(t *testing.T) {
	t.Parallel()
	path := "/sys/bus/pci/devices/0000:01:00.0/device"
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "read", Path: path, Err: syscall.ENODEV}, true},
		{&fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}, true},
		{&fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}, false},
		{errors.New("other"), false},
	} {
		if got := vanished(c.err); got != c.want {
			t.Errorf("vanished(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
