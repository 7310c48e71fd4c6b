package vm

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrNotStatic is a program for the initramfs that needs a dynamic loader:
// the initramfs holds no libraries.
var ErrNotStatic = errors.New("vm: program is not statically linked")

// Marker the init script prints once the guest's userspace runs.
const guestUp = "DXPU-GUEST-UP"

// InitramfsConfig says what goes into the guest's initramfs.
type InitramfsConfig struct {
	// Busybox is a static busybox (Debian's busybox-static: /bin/busybox).
	Busybox string
	// GuestTool is a static dxpu-guest binary.
	GuestTool string
	// GuestArgs follow `dxpu-guest run --console` in /init.
	GuestArgs []string
	// Gzip compresses the archive (smaller; the kernel unpacks either).
	Gzip bool
}

// busybox applets /init and a debugging shell use.
var applets = []string{"sh", "mount", "mkdir", "poweroff", "cat", "ls", "echo", "sleep", "dmesg", "devmem", "lspci", "grep"}

// initScript mounts what the tool needs, runs it with its report between
// markers on the console (ttyS0) and powers off, unless the kernel command
// line says dxpu.stayup.
func initScript(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return `#!/bin/sh
mkdir -p /proc /sys /dev /mnt/huge /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t hugetlbfs hugetlbfs /mnt/huge
echo ` + guestUp + `
/bin/dxpu-guest run --console ` + strings.Join(q, " ") + `
echo "DXPU-EXIT $?"
# dxpu.stayup: the host ends the guest (hot-plug tests, interactive use).
grep -q dxpu.stayup /proc/cmdline && exec sleep 2147483647
poweroff -f
`
}

// WriteInitramfs writes the initramfs (a newc cpio archive) to w.
func WriteInitramfs(w io.Writer, c InitramfsConfig) error {
	bb, err := readStatic(c.Busybox, "busybox")
	if err != nil {
		return err
	}
	tool, err := readStatic(c.GuestTool, "dxpu-guest")
	if err != nil {
		return err
	}
	out := w
	var gz *gzip.Writer
	if c.Gzip {
		gz = gzip.NewWriter(w)
		out = gz
	}
	cw := &cpioWriter{w: out}
	for _, d := range []string{"bin", "dev", "proc", "sys", "mnt", "mnt/huge", "tmp"} {
		if err := cw.Dir(d); err != nil {
			return err
		}
	}
	// The kernel opens /dev/console for init before devtmpfs is mounted.
	if err := cw.CharDev("dev/console", 5, 1); err != nil {
		return err
	}
	if err := cw.File("bin/busybox", bb, 0o755); err != nil {
		return err
	}
	for _, a := range applets {
		if err := cw.Symlink("bin/"+a, "busybox"); err != nil {
			return err
		}
	}
	if err := cw.File("bin/dxpu-guest", tool, 0o755); err != nil {
		return err
	}
	if err := cw.File("init", []byte(initScript(c.GuestArgs)), 0o755); err != nil {
		return err
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("vm: writing the initramfs: %w", err)
	}
	if gz != nil {
		return gz.Close()
	}
	return nil
}

// readStatic reads an ELF program and checks it has no interpreter.
func readStatic(path, what string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("vm: no %s given for the initramfs", what)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vm: %s: %w", what, err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("vm: %s %s is not an ELF program: %w", what, path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%w: %s %s (build dxpu-guest with CGO_ENABLED=0; install busybox-static)", ErrNotStatic, what, path)
		}
	}
	return b, nil
}

// guestToolName is the guest tool's file name next to dxpu or on PATH.
const guestToolName = "dxpu-guest"
