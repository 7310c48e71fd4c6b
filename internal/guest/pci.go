package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// SysfsPCI is where Linux lists PCI functions.
const SysfsPCI = "/sys/bus/pci/devices"

// ErrNoDevice is a PCI function that is not (or no longer) there.
var ErrNoDevice = errors.New("guest: no such PCI function")

// Function is one PCI function as `lspci -nn` shows it: vendor, device and
// class (base class and subclass) in hex without 0x.
type Function struct {
	BDF       string     `json:"bdf"`
	Vendor    string     `json:"vendor"`
	Device    string     `json:"device"`
	Class     string     `json:"class"`
	Resources []Resource `json:"resources,omitempty"`
}

// Resource is one assigned memory or I/O window (a BAR) of a function.
type Resource struct {
	BAR   int    `json:"bar"`
	Start string `json:"start"` // hex, as the guest placed it
	Size  uint64 `json:"size"`
	IO    bool   `json:"io,omitempty"`
}

// List returns the functions under root (SysfsPCI on a live system),
// sorted by address.
func List(root string) ([]Function, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("guest: listing PCI functions: %w", err)
	}
	fns := make([]Function, 0, len(ents))
	for _, e := range ents {
		f, err := Describe(root, e.Name())
		if err != nil {
			return nil, err
		}
		fns = append(fns, f)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].BDF < fns[j].BDF })
	return fns, nil
}

// Describe reads one function's identity and resources.
func Describe(root, bdf string) (Function, error) {
	dir := filepath.Join(root, bdf)
	f := Function{BDF: bdf}
	for _, a := range []struct {
		file   string
		digits int
		shift  uint
		dst    *string
	}{{"vendor", 4, 0, &f.Vendor}, {"device", 4, 0, &f.Device}, {"class", 4, 8, &f.Class}} {
		v, err := readHex(filepath.Join(dir, a.file))
		if err != nil {
			return Function{}, err
		}
		*a.dst = fmt.Sprintf("%0*x", a.digits, v>>a.shift)
	}
	res, err := os.ReadFile(filepath.Join(dir, "resource"))
	if err != nil {
		if vanished(err) {
			return Function{}, fmt.Errorf("%w: %s", ErrNoDevice, bdf)
		}
		return Function{}, fmt.Errorf("guest: %s: %w", bdf, err)
	}
	if f.Resources, err = parseResources(string(res)); err != nil {
		return Function{}, fmt.Errorf("guest: %s/resource: %w", bdf, err)
	}
	return f, nil
}

// parseResources reads sysfs `resource`: one "start end flags" line per
// region (BARs 0-5, the ROM, then bridge windows), unassigned ones all zero.
func parseResources(s string) ([]Resource, error) {
	var out []Resource
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for i, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if i > 5 {
			break // ROM and bridge windows
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			return nil, fmt.Errorf("line %d %q: want start end flags", i+1, line)
		}
		var v [3]uint64
		for k, f := range fs {
			n, err := strconv.ParseUint(f, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			v[k] = n
		}
		if v[0] == 0 && v[1] == 0 {
			continue
		}
		if v[1] < v[0] {
			return nil, fmt.Errorf("line %d: end %#x before start %#x", i+1, v[1], v[0])
		}
		out = append(out, Resource{BAR: i, Start: fmt.Sprintf("%#x", v[0]), Size: v[1] - v[0] + 1, IO: v[2]&0x100 != 0})
	}
	return out, nil
}

// vanished reports whether a sysfs read failed because the function went
// away: its files are gone (ENOENT), or still there while the kernel
// removes it, and a read answers ENODEV (a guest under a hot-remove saw
// "read .../device: no such device" and its watcher exited).
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

func readHex(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if vanished(err) {
			return 0, fmt.Errorf("%w: %s", ErrNoDevice, filepath.Dir(path))
		}
		return 0, fmt.Errorf("guest: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 64)
	if err != nil {
		return 0, fmt.Errorf("guest: %s: %w", path, err)
	}
	return v, nil
}

// Find returns the first function with the given vendor and device (hex
// as in Function; an empty device matches any).
func Find(root, vendor, device string) (Function, error) {
	fns, err := List(root)
	if err != nil {
		return Function{}, err
	}
	for _, f := range fns {
		if f.Vendor == vendor && (device == "" || f.Device == device) {
			return f, nil
		}
	}
	return Function{}, fmt.Errorf("%w: none with vendor %s device %q among %d", ErrNoDevice, vendor, device, len(fns))
}

// ReadConfig returns the function's config space as sysfs gives it: 4096
// bytes when the kernel reaches its extended space, else 256.
func ReadConfig(root, bdf string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, bdf, "config"))
	if err != nil {
		return nil, fmt.Errorf("guest: reading %s config space: %w", bdf, err)
	}
	return b, nil
}

// Command register bits.
const (
	CmdMemory    = 1 << 1
	CmdBusMaster = 1 << 2
)

// Enable turns on memory decoding (sysfs `enable`, what a driver's
// pci_enable_device does: needed after a hot-add, when no firmware ran)
// and bus mastering (a config write: the kernel does that only for a
// driver), so that BAR0 answers and the GPU may DMA.
func Enable(root, bdf string) error {
	dir := filepath.Join(root, bdf)
	cfg, err := os.OpenFile(filepath.Join(dir, "config"), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("guest: %s: %w", bdf, err)
	}
	defer cfg.Close()
	var c [2]byte
	if _, err := cfg.ReadAt(c[:], 4); err != nil {
		return fmt.Errorf("guest: %s: reading the command register: %w", bdf, err)
	}
	if c == [2]byte{0xff, 0xff} {
		return fmt.Errorf("%w: %s reads all ones", ErrDeviceGone, bdf)
	}
	if c[0]&CmdMemory == 0 {
		if err := os.WriteFile(filepath.Join(dir, "enable"), []byte("1"), 0); err != nil {
			return fmt.Errorf("guest: %s: enabling: %w", bdf, err)
		}
		if _, err := cfg.ReadAt(c[:], 4); err != nil {
			return fmt.Errorf("guest: %s: reading the command register: %w", bdf, err)
		}
	}
	if c[0]&(CmdMemory|CmdBusMaster) != CmdMemory|CmdBusMaster {
		c[0] |= CmdMemory | CmdBusMaster
		if _, err := cfg.WriteAt(c[:], 4); err != nil {
			return fmt.Errorf("guest: %s: setting bus master: %w", bdf, err)
		}
	}
	return nil
}
