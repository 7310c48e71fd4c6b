package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/app/childproc"
)

// Errors callers match.
var (
	// ErrQEMUMissing: no qemu-system-x86_64 (Debian: apt install qemu-system-x86).
	ErrQEMUMissing = errors.New("vm: qemu-system-x86_64 not found (install qemu-system-x86)")
	// ErrQEMUTooOld: a QEMU without the proxy PCI device (x-pci-proxy-dev,
	// QEMU 5.2 to 10.x built with multi-process support).
	ErrQEMUTooOld = errors.New("vm: this QEMU has no x-pci-proxy-dev device (need QEMU 5.2-10.x with multi-process support, e.g. Debian 12's 7.2)")
	// ErrNoKernel: no guest kernel found (Debian: apt install linux-image-cloud-amd64).
	ErrNoKernel = errors.New("vm: no guest kernel (install linux-image-cloud-amd64 or give one)")
	// ErrNoGuestTool: no static dxpu-guest binary found.
	ErrNoGuestTool = errors.New("vm: no dxpu-guest binary (build it: CGO_ENABLED=0 go build -o dxpu-guest ./cmd/dxpu-guest)")
)

// CheckQEMU resolves the QEMU binary (name or path) and checks that it has
// the proxy PCI device.
func CheckQEMU(ctx context.Context, qemu string) (string, error) {
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	path, err := exec.LookPath(qemu)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrQEMUMissing, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-nodefaults", "-device", "help").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("vm: %s -device help: %w: %s", path, err, firstLine(out))
	}
	if !strings.Contains(string(out), `"x-pci-proxy-dev"`) {
		return "", fmt.Errorf("%w: %s", ErrQEMUTooOld, path)
	}
	return path, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// KVMUsable reports whether QEMU can run a guest with KVM: /dev/kvm opens
// and answers, and a probe guest under KVM prints its kernel's first line
// within 3 s. (Nested KVM can open and still fail: on the machine this was
// built on the guest stopped at once with "KVM internal error ...
// emulation failure".) The answer is cached per QEMU and kernel.
func KVMUsable(ctx context.Context, qemu, kernel string) bool {
	key := qemu + "\x00" + kernel
	kvmProbe.mu.Lock()
	defer kvmProbe.mu.Unlock()
	if v, ok := kvmProbe.seen[key]; ok {
		return v
	}
	ok := kvmOpens() && kvmBoots(ctx, qemu, kernel)
	kvmProbe.seen[key] = ok
	return ok
}

var kvmProbe = struct {
	mu   sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

// kvmBoots starts kernel under KVM and waits for its first console line.
func kvmBoots(ctx context.Context, qemu, kernel string) bool {
	cmd := exec.Command(qemu, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-serial", "stdio",
		"-accel", "kvm", "-cpu", "max", "-m", "128M", "-kernel", kernel, "-append", "console=ttyS0 earlyprintk=ttyS0 panic=-1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil || childproc.Start(cmd, nil) != nil {
		return false
	}
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Linux version") {
				seen <- true
				break
			}
		}
		seen <- false
		_, _ = io.Copy(io.Discard, out)
	}()
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	ok := false
	select {
	case ok = <-seen:
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	return ok
}

func kvmOpens() bool {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	const kvmGetAPIVersion = 0xae00 // _IO(KVMIO, 0x00)
	v, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	return err == nil && v == 12
}

// FindKernel returns the newest Debian cloud kernel in /boot, else the
// newest kernel there.
func FindKernel() (string, error) {
	for _, pat := range []string{"/boot/vmlinuz-*-cloud-amd64", "/boot/vmlinuz-*"} {
		m, _ := filepath.Glob(pat)
		sort.Strings(m)
		for i := len(m) - 1; i >= 0; i-- {
			if f, err := os.Open(m[i]); err == nil { // root-only on some systems
				f.Close()
				return m[i], nil
			}
		}
	}
	return "", ErrNoKernel
}

// FindGuestTool returns dxpu-guest next to the running program, else on
// PATH.
func FindGuestTool() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), guestToolName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(guestToolName); err == nil {
		return p, nil
	}
	return "", ErrNoGuestTool
}
