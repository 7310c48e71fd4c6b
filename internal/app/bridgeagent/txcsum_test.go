package bridgeagent_test

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolSTXCSUM is ETHTOOL_STXCSUM (linux/ethtool.h): set TX checksumming.
const ethtoolSTXCSUM = 0x17

// disableTXChecksum turns TX checksum offload off on the interface name in
// the calling thread's namespace, so that datagrams leave it with their
// UDP checksum complete, as they would on a wire. With the offload on, a
// veth hands the far side a partial checksum to finish; the XDP switch
// rewrites the addresses and redirects the frame as raw bytes, the partial
// sum is never finished, and the far kernel drops the datagram.
func disableTXChecksum(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	// On the heap, which does not move: the kernel gets its address
	// inside ifr as a plain integer.
	val := &struct{ cmd, data uint32 }{cmd: ethtoolSTXCSUM}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(val))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(val)
	if errno != 0 {
		return fmt.Errorf("ETHTOOL_STXCSUM off on %s: %w", name, errno)
	}
	return nil
}
