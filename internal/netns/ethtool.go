package netns

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SetTXChecksum turns TX checksum offload of the interface name in ns on
// or off (ethtool -K NAME tx on|off).
//
// Kernel UDP sockets sending into an XDP switch over a veth need it off:
// with the offload on, a veth hands the far end a partial UDP checksum to
// finish; an XDP program that rewrites addresses and redirects the frame
// forwards the unfinished sum as bytes, and the far kernel drops the
// datagram.
func (ns *NS) SetTXChecksum(name string, on bool) error {
	var data uint32
	if on {
		data = 1
	}
	return ns.Do(func() error {
		if err := ethtoolValue(name, unix.ETHTOOL_STXCSUM, &data); err != nil {
			return fmt.Errorf("netns: TX checksum offload on %s in %s: %w", name, ns.Name, err)
		}
		return nil
	})
}

// TXChecksum reports whether TX checksum offload is on for the interface
// name in ns.
func (ns *NS) TXChecksum(name string) (bool, error) {
	var data uint32
	err := ns.Do(func() error {
		if err := ethtoolValue(name, unix.ETHTOOL_GTXCSUM, &data); err != nil {
			return fmt.Errorf("netns: TX checksum offload of %s in %s: %w", name, ns.Name, err)
		}
		return nil
	})
	return data != 0, err
}

// ethtoolValue runs the ethtool command cmd, which takes or returns one
// 32-bit value (struct ethtool_value), on name in the calling thread's
// namespace.
func ethtoolValue(name string, cmd uint32, data *uint32) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	// struct ethtool_value on the heap, which does not move: the kernel
	// finds it through a pointer inside struct ifreq.
	val := &struct{ cmd, data uint32 }{cmd: cmd, data: *data}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte // the rest of ifreq's union
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(val))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(val)
	if errno != 0 {
		return errno
	}
	*data = val.data
	return nil
}
