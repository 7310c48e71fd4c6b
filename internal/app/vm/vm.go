package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/vmm/qemuproxy"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/internal/guest"
)

// ErrNoSlot is a hot-add with every hot-plug slot taken.
var ErrNoSlot = errors.New("vm: no free slot for another GPU")

// GPU is a PCI function lent to the guest: Serve answers QEMU's end of its
// proxy socket (config and BAR accesses, the guest's RAM for DMA) until
// QEMU closes it (nil) or ctx ends. When QEMU dies, ctx is cancelled with
// an ErrGuestDied cause before the socket closes.
type GPU interface {
	Serve(ctx context.Context, conn *qemuproxy.Conn) error
}

// Options configure a guest.
type Options struct {
	// QEMU is the qemu-system-x86_64 to run (name or path; default on PATH).
	QEMU string
	// Kernel is the guest kernel (default: the newest Debian cloud kernel
	// in /boot, see FindKernel).
	Kernel string
	// Busybox is a static busybox (default /bin/busybox, from
	// busybox-static); GuestTool a static dxpu-guest (default
	// FindGuestTool).
	Busybox, GuestTool string
	// GuestArgs are the flags of `dxpu-guest run` in the guest.
	GuestArgs []string
	// Machine is "q35" (default: a PCIe root port per GPU slot) or "pc"
	// (GPUs on the root bus, ACPI hot-plug).
	Machine string
	// MemoryMB is the guest's RAM (default 512), shared with the GPUs'
	// servers as a memfd.
	MemoryMB int
	// Accel is "kvm", "tcg", or "" for KVM when /dev/kvm answers, else TCG.
	Accel string
	// GPUs are lent at boot, in slots 0, 1, ...; HotplugSlots more slots
	// are left empty for HotAdd (default 1 on q35).
	GPUs         []GPU
	HotplugSlots int
	// Dir holds the initramfs, the QMP socket and the serial log (default:
	// a temporary directory removed by Close): created 0700 when missing,
	// refused when others may enter it; the files in it are 0600.
	// SerialLog defaults to Dir/serial.log.
	Dir, SerialLog string
	// Hugepages is how many 2 MiB pages the guest kernel reserves at boot
	// (hugepages=) for the guest tool's DMA buffers (default:
	// GuestHugepages of the tool's default copy size). Reserved later, when
	// the tool runs, they may not be found: the guest's memory is
	// fragmented by then.
	Hugepages int
	// Append is added to the kernel command line.
	Append string
	// StayUp keeps the guest running after its tool is done, until Shutdown
	// or Close (the default powers it off).
	StayUp bool
	// Log receives the launcher's messages (nil: discarded).
	Log *slog.Logger
}

func (o *Options) fill(ctx context.Context) error {
	var err error
	if o.QEMU, err = CheckQEMU(ctx, o.QEMU); err != nil {
		return err
	}
	if o.Kernel == "" {
		if o.Kernel, err = FindKernel(); err != nil {
			return err
		}
	}
	if o.Busybox == "" {
		o.Busybox = "/bin/busybox"
	}
	if o.GuestTool == "" {
		if o.GuestTool, err = FindGuestTool(); err != nil {
			return err
		}
	}
	switch o.Machine {
	case "":
		o.Machine = "q35"
	case "q35", "pc":
	default:
		return fmt.Errorf("vm: machine %q: want q35 or pc", o.Machine)
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = 512
	}
	if o.MemoryMB < 128 || o.MemoryMB > 1<<20 {
		return fmt.Errorf("vm: %d MiB of guest memory: want 128 or more", o.MemoryMB)
	}
	if o.Hugepages == 0 {
		o.Hugepages = GuestHugepages(guest.DefaultCopyBytes)
	}
	if o.Hugepages < 0 || o.Hugepages*guest.HugePage>>20 > o.MemoryMB*3/4 {
		return fmt.Errorf("vm: %d hugepages (%d MiB) do not fit %d MiB of guest memory with room for the kernel and the tool", o.Hugepages, o.Hugepages*guest.HugePage>>20, o.MemoryMB)
	}
	switch o.Accel {
	case "":
		o.Accel = "tcg"
		if KVMUsable(ctx, o.QEMU, o.Kernel) {
			o.Accel = "kvm"
		}
	case "kvm", "tcg":
	default:
		return fmt.Errorf("vm: accelerator %q: want kvm or tcg", o.Accel)
	}
	if o.Machine == "q35" && o.HotplugSlots == 0 {
		o.HotplugSlots = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// VM is a running guest.
type VM struct {
	o        Options
	dir      string
	ownDir   bool
	start    time.Time
	cmd      *exec.Cmd
	logFile  *os.File
	con      *console
	qmp      *qmp
	exited   chan struct{}
	waitErr  error
	died     error       // ErrGuestDied with how, when QEMU ended on its own badly
	stopping atomic.Bool // this VM is killing QEMU: its end is no death
	stopCtx  func() bool
	// keepLog: an error named the serial log, so Close leaves it (and,
	// in a temporary directory, the directory) in place.
	keepLog atomic.Bool

	mu    sync.Mutex
	slots []string // GPU id per slot ("" free); nil on pc
	lent  map[string]*lending
}

type lending struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
	err    error
	// qemuEnd is a copy of QEMU's end of the proxy socket, held so that
	// the server sees the socket close only once the VM knows why (see
	// exitedWith).
	qemuEnd *os.File
	endOnce sync.Once
}

// Start boots a guest. It returns once QEMU answers on QMP; the guest
// tool's events and report come through WaitEvent and Result. Everything
// it started ends when ctx ends or Close is called.
func Start(ctx context.Context, o Options) (_ *VM, err error) {
	if err := o.fill(ctx); err != nil {
		return nil, err
	}
	v := &VM{o: o, dir: o.Dir, lent: map[string]*lending{}, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			v.Close()
		}
	}()
	initrd, err := v.prepare()
	if err != nil {
		return nil, err
	}
	o.SerialLog = v.o.SerialLog
	qmpPath := filepath.Join(v.dir, "qmp.sock")
	args := v.args(initrd, qmpPath)

	// One socketpair per boot GPU: QEMU inherits one end as fd 3+i; its
	// lending keeps our copy of that end.
	var theirs []*os.File
	if o.Machine == "q35" {
		v.slots = make([]string, len(o.GPUs)+o.HotplugSlots)
	}
	for i, g := range o.GPUs {
		id := fmt.Sprintf("gpu%d", i)
		conn, qf, err := proxyPair(id)
		if err != nil {
			return nil, err
		}
		theirs = append(theirs, qf)
		v.serve(ctx, id, g, conn, qf)
		dev := fmt.Sprintf("x-pci-proxy-dev,id=%s,fd=%d", id, 3+i)
		if v.slots != nil {
			v.slots[i] = id
			dev += fmt.Sprintf(",bus=rp%d", i)
		}
		args = append(args, "-device", dev)
	}

	v.cmd = exec.Command(o.QEMU, args...)
	v.cmd.ExtraFiles = theirs
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // and Pdeathsig: childproc.Start
	out, err := v.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	errOut, err := v.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	o.Log.Info("vm: starting QEMU", "accel", o.Accel, "machine", o.Machine, "gpus", len(o.GPUs), "cmd", strings.Join(v.cmd.Args, " "))
	v.start = time.Now()
	v.con = newConsole(v.start)
	if err := childproc.Start(v.cmd, nil); err != nil {
		return nil, fmt.Errorf("vm: starting %s: %w", o.QEMU, err)
	}
	go func() {
		done := make(chan struct{})
		go func() { v.con.followErrors(errOut, v.logFile); close(done) }()
		v.con.follow(out, v.logFile)
		<-done
		v.waitErr = v.cmd.Wait()
		v.exitedWith(v.waitErr)
		close(v.exited)
	}()
	v.stopCtx = context.AfterFunc(ctx, v.kill)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if v.qmp, err = dialQMP(qctx, qmpPath, v.exited, o.Log); err != nil {
		return nil, v.startFailed(err)
	}
	// QEMU bound the socket under its umask; the directory (0700) already
	// keeps others out, and now the socket itself is the owner's alone.
	if err := os.Chmod(qmpPath, 0o600); err != nil {
		return nil, fmt.Errorf("vm: QMP socket: %w", err)
	}
	return v, nil
}

// prepare makes the VM's directory (a temporary one, or Options.Dir kept
// private) and writes the initramfs and opens the serial log there, both
// 0600; it returns the initramfs's path.
func (v *VM) prepare() (string, error) {
	var err error
	if v.dir == "" {
		if v.dir, err = os.MkdirTemp("", "dxpu-vm-"); err != nil {
			return "", fmt.Errorf("vm: %w", err)
		}
		v.ownDir = true
	} else if err := privateDir(v.dir); err != nil {
		return "", err
	}
	initrd := filepath.Join(v.dir, "initramfs.cpio.gz")
	f, err := createPrivate(initrd)
	if err != nil {
		return "", fmt.Errorf("vm: %w", err)
	}
	err = WriteInitramfs(f, InitramfsConfig{Busybox: v.o.Busybox, GuestTool: v.o.GuestTool, GuestArgs: v.o.GuestArgs, Gzip: true})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if v.o.SerialLog == "" {
		v.o.SerialLog = filepath.Join(v.dir, "serial.log")
	}
	if v.logFile, err = createPrivate(v.o.SerialLog); err != nil {
		return "", fmt.Errorf("vm: serial log: %w", err)
	}
	return initrd, nil
}

// kernelArgs start the guest kernel's command line. no_timer_check: a
// TCG guest on a loaded host runs its emulated CPU so slowly that the
// kernel's boot-time check of the IO-APIC timer sees no tick in time and
// panics ("IO-APIC + timer doesn't work!", seen in CI with a VM host
// booting beside the rest of the tests); the timer works, the check is
// what a slow virtual CPU fails.
const kernelArgs = "console=ttyS0 rdinit=/init panic=-1 quiet no_timer_check"

// args builds QEMU's command line.
func (v *VM) args(initrd, qmpPath string) []string {
	o := v.o
	mem := fmt.Sprintf("%dM", o.MemoryMB)
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "stdio", "-qmp", "unix:" + qmpPath + ",server=on,wait=off",
		"-accel", o.Accel, "-cpu", "max", "-smp", "1", "-m", mem,
		// memfd RAM shared: QEMU hands it to each GPU's server for DMA.
		"-object", "memory-backend-memfd,id=mem,size=" + mem + ",share=on",
		"-machine", o.Machine + ",memory-backend=mem",
		"-kernel", o.Kernel, "-initrd", initrd,
		"-append", strings.TrimSpace(kernelArgs + fmt.Sprintf(" hugepages=%d ", o.Hugepages) + stayUp(o.StayUp) + o.Append)}
	if o.Machine == "q35" {
		for i := range len(o.GPUs) + o.HotplugSlots {
			// mem-reserve: an empty port still gets a window a GPU's BAR0
			// fits in when it is hot-added.
			args = append(args, "-device", fmt.Sprintf("pcie-root-port,id=rp%d,bus=pcie.0,chassis=%d,slot=%d,mem-reserve=64M", i, i+1, i+1))
		}
	}
	return args
}

// GuestHugepages is how many hugepages the guest tool takes for copies of
// copyBytes: its arena page, and a source and a destination buffer.
func GuestHugepages(copyBytes uint64) int {
	return int(1 + 2*((copyBytes+guest.HugePage-1)/guest.HugePage))
}

func stayUp(on bool) string {
	if on {
		return "dxpu.stayup "
	}
	return ""
}

// proxyPair returns this process's end of a new proxy socket and the end
// for QEMU.
func proxyPair(id string) (*qemuproxy.Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("vm: socketpair for %s: %w", id, err)
	}
	ours := os.NewFile(uintptr(fds[0]), id+"-server")
	nc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("vm: socket for %s: %w", id, err)
	}
	return qemuproxy.NewConn(nc.(*net.UnixConn)), os.NewFile(uintptr(fds[1]), id+"-qemu"), nil
}

// serve runs g on conn until QEMU lets go of it or the VM closes. qemuEnd
// is QEMU's end of the socket, which the lending holds (and closes).
func (v *VM) serve(ctx context.Context, id string, g GPU, conn *qemuproxy.Conn, qemuEnd *os.File) {
	sctx, cancel := context.WithCancelCause(ctx)
	l := &lending{cancel: cancel, done: make(chan struct{}), qemuEnd: qemuEnd}
	v.mu.Lock()
	v.lent[id] = l
	v.mu.Unlock()
	go func() {
		defer close(l.done)
		l.err = g.Serve(sctx, conn)
		_ = conn.Close()
		if l.err != nil {
			v.o.Log.Warn("vm: GPU server stopped", "gpu", id, "err", l.err)
		}
	}()
}

// HotAdd lends g to the running guest as function id: the socket goes to
// QEMU through QMP getfd, then device_add plugs a proxy device on it
// (ACPI hot-plug; the guest enables the function itself).
func (v *VM) HotAdd(ctx context.Context, id string, g GPU) error {
	v.mu.Lock()
	_, taken := v.lent[id]
	bus := "pci.0"
	slot := -1
	if v.slots != nil {
		for i, s := range v.slots {
			if s == "" {
				slot = i
				break
			}
		}
		if slot >= 0 {
			v.slots[slot] = id
			bus = fmt.Sprintf("rp%d", slot)
		}
	}
	v.mu.Unlock()
	if taken {
		return fmt.Errorf("vm: a GPU %q is already lent", id)
	}
	if v.slots != nil && slot < 0 {
		return fmt.Errorf("%w (%d slots)", ErrNoSlot, len(v.slots))
	}
	conn, qf, err := proxyPair(id)
	if err != nil {
		v.freeSlot(id)
		return err
	}
	// Serve first: device_add's realize blocks QEMU's main loop on config
	// reads that only the server answers.
	v.serve(ctx, id, g, conn, qf)
	fail := func(err error) error {
		v.stopLending(id)
		return err
	}
	if _, err := v.qmp.execute(ctx, "getfd", map[string]any{"fdname": id}, []int{int(qf.Fd())}); err != nil {
		return fail(err)
	}
	if _, err := v.qmp.execute(ctx, "device_add", map[string]any{"driver": "x-pci-proxy-dev", "id": id, "fd": id, "bus": bus}, nil); err != nil {
		return fail(err)
	}
	v.o.Log.Info("vm: GPU hot-added", "gpu", id, "bus", bus)
	return nil
}

// HotRemove unplugs function id (device_del), waits for QEMU's
// DEVICE_DELETED and for the GPU's server to see QEMU close the socket.
func (v *VM) HotRemove(ctx context.Context, id string) error {
	v.mu.Lock()
	l := v.lent[id]
	v.mu.Unlock()
	if l == nil {
		return fmt.Errorf("vm: no GPU %q lent", id)
	}
	from := v.qmp.eventCount()
	if _, err := v.qmp.execute(ctx, "device_del", map[string]any{"id": id}, nil); err != nil {
		return err
	}
	if _, err := v.qmp.waitEvent(ctx, from, "DEVICE_DELETED", func(d json.RawMessage) bool {
		var e struct {
			Device string `json:"device"`
		}
		return json.Unmarshal(d, &e) == nil && e.Device == id
	}); err != nil {
		return err
	}
	l.releaseQEMUEnd() // QEMU closed its own: now the server sees EOF
	select {
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("vm: %s deleted but its server still runs: %w", id, ctx.Err())
	}
	v.stopLending(id)
	v.o.Log.Info("vm: GPU hot-removed", "gpu", id)
	return l.err
}

func (v *VM) stopLending(id string) {
	v.mu.Lock()
	l := v.lent[id]
	delete(v.lent, id)
	v.mu.Unlock()
	if l != nil {
		l.cancel(nil)
		l.releaseQEMUEnd()
		<-l.done
	}
	v.freeSlot(id)
}

func (v *VM) freeSlot(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, s := range v.slots {
		if s == id {
			v.slots[i] = ""
		}
	}
}

// Accel returns the accelerator QEMU runs the guest with.
func (v *VM) Accel() string { return v.o.Accel }

// SerialLog returns the path of the guest's console log.
func (v *VM) SerialLog() string { return v.o.SerialLog }

// logRef is the "(serial log PATH)" an error ends with; Close then keeps
// the log for the reader.
func (v *VM) logRef() string {
	v.keepLog.Store(true)
	return fmt.Sprintf("(serial log %s)", v.o.SerialLog)
}

// qemuExitWait is how long a failed start waits for QEMU to exit, so that
// its error message can be quoted.
const qemuExitWait = 2 * time.Second

// startFailed is err from a start that QEMU did not answer, with the
// cause QEMU printed when it exited (a KVM that cannot run the guest
// fails an assertion: the line before it says why).
func (v *VM) startFailed(err error) error {
	exited := false
	select {
	case <-v.exited: // closed once QEMU's stderr is read to its end
		exited = true
	case <-time.After(qemuExitWait):
	}
	if msg := v.con.qemuError(); exited && msg != "" {
		hint := ""
		if v.o.Accel == "kvm" {
			hint = "; --accel tcg runs the guest without KVM"
		}
		return fmt.Errorf("vm: QEMU exited at start-up: %s%s %s", msg, hint, v.logRef())
	}
	return fmt.Errorf("%w %s", err, v.logRef())
}

// WaitEvent waits for the guest tool's event named name (the first one
// from index from on) and returns it with the index after it; an error if
// the tool reports before it.
func (v *VM) WaitEvent(ctx context.Context, from int, name string) (GuestEvent, int, error) {
	var ev GuestEvent
	next, found := from, false
	err := v.con.waitFor(ctx, "guest event "+name, func() bool {
		for i := from; i < len(v.con.events); i++ {
			if v.con.events[i].Name == name {
				ev, next, found = v.con.events[i], i+1, true
				return true
			}
		}
		return v.con.report != nil // the tool is done: the event will not come
	})
	if err == nil && !found {
		err = fmt.Errorf("vm: the guest tool finished without event %s: %s", name, v.con.report.Error)
	}
	return ev, next, err
}

// Timing is when things happened, in seconds since QEMU started.
type Timing struct {
	// BootS: the guest's /init ran; ResultS: the guest tool's report was
	// printed.
	BootS   float64 `json:"boot_s"`
	ResultS float64 `json:"result_s"`
}

// Result waits for the guest tool's report; its Error is set when the
// tool failed.
// Booted waits until the guest's /init runs (or the console says it
// never will: Result then tells why).
func (v *VM) Booted(ctx context.Context) error {
	return v.con.waitFor(ctx, "the guest's /init", func() bool { return v.con.up != 0 || v.con.report != nil })
}

func (v *VM) Result(ctx context.Context) (guest.Report, Timing, error) {
	var rep guest.Report
	var tm Timing
	err := v.con.waitFor(ctx, "the guest's report", func() bool {
		if v.con.report == nil {
			return false
		}
		rep, tm = *v.con.report, Timing{BootS: v.con.up.Seconds(), ResultS: v.con.resAt.Seconds()}
		return true
	})
	if err != nil {
		return rep, tm, fmt.Errorf("%w: %w %s", ErrNoResult, err, v.logRef())
	}
	return rep, tm, nil
}

// Wait waits for QEMU to exit: nil when the guest powered off (or this VM
// stopped it), an error wrapping ErrGuestDied that names the signal or
// exit status when QEMU died.
func (v *VM) Wait(ctx context.Context) error {
	select {
	case <-v.exited:
		return v.died
	case <-ctx.Done():
		return fmt.Errorf("vm: waiting for the guest to power off: %w", ctx.Err())
	}
}

// Shutdown asks QEMU to quit, and kills it if it has not within grace.
func (v *VM) Shutdown(ctx context.Context, grace time.Duration) error {
	select {
	case <-v.exited:
		return nil
	default:
	}
	qctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if v.qmp != nil {
		_, _ = v.qmp.execute(qctx, "quit", nil, nil)
	}
	if err := v.Wait(qctx); err != nil {
		if errors.Is(err, ErrGuestDied) {
			return err
		}
		v.kill()
		<-v.exited
		return units.Errorf("vm: QEMU did not quit within %v; killed", grace)
	}
	return nil
}

// kill ends QEMU's whole process group.
func (v *VM) kill() {
	v.stopping.Store(true)
	if v.cmd != nil && v.cmd.Process != nil {
		_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Close kills whatever still runs (QEMU, the GPUs' servers), waits for it
// and removes the temporary directory.
func (v *VM) Close() {
	if v.stopCtx != nil {
		v.stopCtx()
	}
	if v.cmd != nil && v.cmd.Process != nil {
		v.kill()
		<-v.exited
	}
	if v.qmp != nil {
		v.qmp.close()
		<-v.qmp.done
	}
	v.mu.Lock()
	ids := make([]string, 0, len(v.lent))
	for id := range v.lent {
		ids = append(ids, id)
	}
	v.mu.Unlock()
	for _, id := range ids {
		v.stopLending(id)
	}
	if v.logFile != nil {
		v.logFile.Close()
	}
	if v.ownDir {
		v.removeDir()
	}
}

// removeDir removes the VM's temporary directory, or, when an error
// named the serial log there, everything in it but the log.
func (v *VM) removeDir() {
	log := v.o.SerialLog
	if !v.keepLog.Load() || filepath.Dir(log) != filepath.Clean(v.dir) {
		os.RemoveAll(v.dir)
		return
	}
	entries, _ := os.ReadDir(v.dir)
	for _, e := range entries {
		if p := filepath.Join(v.dir, e.Name()); p != filepath.Clean(log) {
			os.RemoveAll(p)
		}
	}
}
