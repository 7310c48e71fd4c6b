package vm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs the rest of the test under a umask that lets the group
// write (as a shared lab account might have). Not parallel: the umask is
// the process's.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s: mode %04o, want %04o", path, got, want)
	}
}

// TestPrivateDirAndFiles: what a VM writes before QEMU starts: --dir is
// created 0700 when missing (its parents too), kept when it is private
// already, and refused when others may enter it; the initramfs and the
// serial log are 0600, a stale log with a wider mode included, whatever
// the umask. (`dxpu vm run --dir D` with D missing once failed opening
// D/initramfs.cpio.gz, and made the log 0664 under umask 002.)
func TestPrivateDirAndFiles(t *testing.T) {
	self := fakeELF(t, false)
	withUmask(t, 0o002)
	base := t.TempDir()
	dir := filepath.Join(base, "a", "vm")
	prepare := func() error {
		v := &VM{o: Options{Busybox: self, GuestTool: self}, dir: dir}
		_, err := v.prepare()
		if v.logFile != nil {
			v.logFile.Close()
		}
		return err
	}
	if err := prepare(); err != nil {
		t.Fatal(err)
	}
	wantMode(t, dir, 0o700)
	for _, name := range []string{"serial.log", "initramfs.cpio.gz"} {
		wantMode(t, filepath.Join(dir, name), 0o600)
	}
	log := filepath.Join(dir, "serial.log")
	if err := os.WriteFile(log, []byte("old"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(log, 0o666)
	if err := prepare(); err != nil {
		t.Fatalf("again: %v", err)
	}
	wantMode(t, log, 0o600)
	if b, _ := os.ReadFile(log); len(b) != 0 {
		t.Errorf("the serial log kept %q from before", b)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := privateDir(open); err == nil || !strings.Contains(err.Error(), open) || !strings.Contains(err.Error(), "0775") {
		t.Errorf("a 0775 --dir: %v, want it refused naming it and its mode", err)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if err := privateDir(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as --dir: %v", err)
	}
}

// TestVMDirIsPrivate: a guest started with a --dir that does not exist
// yet, under a group-writable umask, gets it 0700 with the QMP socket, the
// serial log and the initramfs 0600 in it (a group-writable QMP socket
// lets group members drive root's QEMU). Needs QEMU.
func TestVMDirIsPrivate(t *testing.T) {
	o := vmOptions(t)
	withUmask(t, 0o002)
	o.Dir = filepath.Join(t.TempDir(), "vm")
	o.StayUp = true
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	v, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	wantMode(t, o.Dir, 0o700)
	for _, name := range []string{"qmp.sock", "serial.log", "initramfs.cpio.gz"} {
		wantMode(t, filepath.Join(o.Dir, name), 0o600)
	}
}
