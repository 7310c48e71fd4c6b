package bridgeagent

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/vm"
	"github.com/dxpu/dxpu/internal/privtest"
)

// TestSetupApply: good settings fill in Options; each bad one is a usage
// error naming its flag.
func TestSetupApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cred := filepath.Join(dir, "cred")
	os.WriteFile(cred, []byte("c0ffee\n"), 0o600)
	box := filepath.Join(dir, "box.json")
	os.WriteFile(box, []byte(`{"id":"box7","bridge":{"switch_port":"p7","mac":"02:00:00:00:00:07"},"gpus":[{"id":"g0","model":"H100"}]}`), 0o600)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	emptyBox := write("empty-box.json", `{}`)
	noGPUs := write("no-gpus.json", `{"id":"box7","bridge":{"switch_port":"p7","mac":"02:00:00:00:00:07"},"gpus":[]}`)
	emptyCred := write("empty.cred", "")
	strange := filepath.Join(dir, "strange.json")
	os.WriteFile(strange, []byte(`{"id":"box7","colour":"red"}`), 0o600)
	good := Setup{Role: "gpu", Listen: "127.0.0.1:4791", Switch: "127.0.0.1:8855", CredentialFile: cred, BoxFile: box, MemBase: "0x1000", MemSize: "1M"}
	var o Options
	if err := good.Apply(&o); err != nil {
		t.Fatal(err)
	}
	if o.Role != bridge.RoleGPU || o.Listen.Port() != 4791 || o.Switch.Port() != 8855 || o.Credential != "c0ffee" ||
		o.Box == nil || o.Box.ID != "box7" || o.MemBase != 0x1000 || o.MemSize != 1<<20 {
		t.Fatalf("%+v", o)
	}
	// A host whose PCIe side is a guest.
	guest := func(s *Setup) {
		s.Role, s.BoxFile, s.VM, s.VMOptions = "host", "", true, vm.Options{MemoryMB: 1024, Machine: "q35"}
	}
	vmHost := good
	guest(&vmHost)
	o = Options{}
	if err := vmHost.Apply(&o); err != nil || o.VM == nil || o.VM.MemoryMB != 1024 || o.Role != bridge.RoleHost {
		t.Fatalf("--vm: %v, %+v", err, o)
	}
	o.Ports = 0
	if err := o.fill(); err != nil || o.Ports != 32 || o.slots() != maxGuestSlots {
		t.Fatalf("a q35 guest host: %d ports, %d slots (%v); want 32 registered, %d slots", o.Ports, o.slots(), err, maxGuestSlots)
	}
	o.VM.Machine, o.Ports = "pc", 20
	if o.slots() != 20 {
		t.Fatalf("a pc guest (no root ports) has %d slots, want all 20 ports", o.slots())
	}
	for want, bad := range map[string]func(*Setup){
		"--role":                  func(s *Setup) { s.Role = "middle" },
		"--listen":                func(s *Setup) { s.Listen = "x" },
		"--switch":                func(s *Setup) { s.Switch = "y" },
		"--agent-credential-file": func(s *Setup) { s.CredentialFile = "" },
		"no such file":            func(s *Setup) { s.CredentialFile = filepath.Join(dir, "none") },
		"--box is for":            func(s *Setup) { s.Role = "host" },
		"unknown field":           func(s *Setup) { s.BoxFile = strange },
		// A {} box is no box: refused, naming what it lacks.
		"--box: " + emptyBox + ": invalid argument: missing required fields id, bridge.switch_port, bridge.mac": func(s *Setup) { s.BoxFile = emptyBox },
		"--box: " + noGPUs + ": gpus is empty":      func(s *Setup) { s.BoxFile = noGPUs },
		emptyCred + " is empty: expected one token": func(s *Setup) { s.CredentialFile = emptyCred },
		"--mem-base":              func(s *Setup) { s.MemBase = "low" },
		"--mem-size":              func(s *Setup) { s.MemSize = "lots" },
		"--vm is for --role host": func(s *Setup) { s.VM = true },
		"--memory-mb":             func(s *Setup) { guest(s); s.VMOptions.MemoryMB = 64 },
		"--machine":               func(s *Setup) { guest(s); s.VMOptions.Machine = "virt" },
		"--accel":                 func(s *Setup) { guest(s); s.VMOptions.Accel = "hvf" },
	} {
		s := good
		bad(&s)
		var o Options
		if err := s.Apply(&o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a usage error naming it", want, err)
		}
	}
}

// TestSetupSizes: --mtu, --max-payload and --mps are checked as 'dxpu
// bridge' checks them, --mtu against the data plane's receive buffers; --mps
// given to anything but a memory device is refused.
func TestSetupSizes(t *testing.T) {
	t.Parallel()
	cred := filepath.Join(t.TempDir(), "cred")
	os.WriteFile(cred, []byte("c0ffee\n"), 0o600)
	gpu := Setup{Role: "gpu", Listen: "127.0.0.1:4791", CredentialFile: cred, MemBase: "0x1000", MemSize: "1M"}
	host := gpu
	host.Role = "host"
	for _, c := range []struct {
		s    Setup
		mps  bool
		o    Options
		want string // "": accepted
	}{
		{gpu, true, Options{PCIe: PCIeMemory, MTU: 8972, MaxPayload: 2048, MPS: 2048}, ""},
		{gpu, false, Options{PCIe: PCIeMemory, MTU: 9216}, ""},
		{host, false, Options{MTU: 8972, MaxPayload: 2048, MPS: 256}, ""}, // --mps's default, unused
		{gpu, false, Options{PCIe: PCIeMemory, MTU: 9217}, "--mtu 9217: want at most 9216 (the data plane's receive buffers)"},
		{gpu, false, Options{PCIe: PCIeMemory, MaxPayload: 1002}, "--max-payload 1002: want a multiple of 4 in 4..4096"},
		{gpu, true, Options{PCIe: PCIeMemory, MPS: 300}, "--mps 300: want 128, 256"},
		{gpu, true, Options{PCIe: PCIeMemory, MPS: 1024}, "--mps 1024 exceeds --max-payload 512"},
		{gpu, true, Options{PCIe: PCIeEmuGPU, MPS: 512}, `--mps shapes a memory device's completions (--pcie memory), not "emu-gpu"`},
		{host, true, Options{MPS: 512}, "--mps shapes a memory device's completions (--pcie memory), not --role host"},
	} {
		s, o := c.s, c.o
		s.MPSGiven = c.mps
		err := s.Apply(&o)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (!errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want a usage error with %q", c.o, err, c.want)
		}
	}
}

// TestDefaultCompletionTimeout: an agent not given --completion-timeout
// waits twice --dead-after in both roles (an outage the link hides stays
// hidden from the requests outstanding across it); one given keeps it.
func TestDefaultCompletionTimeout(t *testing.T) {
	t.Parallel()
	listen := netip.MustParseAddrPort("127.0.0.1:4791")
	for _, c := range []struct {
		o    Options
		want time.Duration
	}{
		{Options{Role: bridge.RoleGPU}, 2 * time.Second},
		{Options{Role: bridge.RoleHost}, 2 * time.Second},
		{Options{Role: bridge.RoleGPU, DeadAfter: 3 * time.Second}, 6 * time.Second},
		{Options{Role: bridge.RoleHost, DeadAfter: 500 * time.Millisecond}, time.Second},
		{Options{Role: bridge.RoleGPU, CompletionTimeout: 300 * time.Millisecond}, 300 * time.Millisecond},
	} {
		o := c.o
		o.Listen = listen
		if err := o.fill(); err != nil {
			t.Fatalf("%+v: %v", c.o, err)
		}
		if o.CompletionTimeout != c.want {
			t.Errorf("%v, --dead-after %v, --completion-timeout %v: %v, want %v", c.o.Role, c.o.DeadAfter, c.o.CompletionTimeout, o.CompletionTimeout, c.want)
		}
	}
}

// TestSetupRefusesPlantedCredential: findings F5 and F6 of the attack
// trial for --agent-credential-file: a FIFO (it hung the agent), a
// group-readable file and (as root) another user's file
// are usage errors of one line naming the flag and the path.
func TestSetupRefusesPlantedCredential(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cred := filepath.Join(dir, "cred")
	os.WriteFile(cred, []byte("c0ffee\n"), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	grp := filepath.Join(dir, "grp")
	os.WriteFile(grp, []byte("c0ffee\n"), 0o600)
	os.Chmod(grp, 0o640)
	cases := map[string]string{
		fifo: "not a regular file (a FIFO)",
		grp:  "mode 0640 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)",
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		os.WriteFile(theirs, []byte("c0ffee\n"), 0o600)
		if err := os.Chown(theirs, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		cases[theirs] = "owned by uid 1001, not by this process (uid 0)"
	}
	for path, what := range cases {
		s := Setup{Role: "host", Listen: "127.0.0.1:4791", CredentialFile: path, MemBase: "0x1000", MemSize: "1M"}
		done := make(chan error, 1)
		go func() { done <- s.Apply(&Options{}) }()
		select {
		case err := <-done:
			if want := "--agent-credential-file " + path + ": " + what; !errors.Is(err, apperr.ErrUsage) || err.Error() != want {
				t.Errorf("%v, want the usage error %q", err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Apply still blocked after 5s", path)
		}
	}
	privtest.Root(t) // the owner case ran above only as root
}
