package vm

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format the kernel
// unpacks into its initramfs (Documentation/driver-api/early-userspace/
// buffer-format.rst). Each entry is a 110-byte ASCII header, the name
// with its NUL, padding to 4 bytes, the data, padding to 4 bytes:
//
//	off len field (8 hex digits each after the magic)
//	  0   6 magic "070701"
//	  6   8 inode     14  8 mode      22  8 uid       30  8 gid
//	 38   8 nlink     46  8 mtime     54  8 filesize  62  8 devmajor
//	 70   8 devminor  78  8 rdevmajor 86  8 rdevminor 94  8 namesize (with NUL)
//	102   8 check (0)
//
// The archive ends with an entry named "TRAILER!!!".
type cpioWriter struct {
	w   io.Writer
	n   int64 // bytes written
	ino uint32
	err error
}

// File modes the initramfs needs.
const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeLink = 0o120000
	modeChar = 0o020000
)

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	var n int
	n, c.err = c.w.Write(b)
	c.n += int64(n)
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// entry writes one member; rdev is (major, minor) for device nodes.
func (c *cpioWriter) entry(name string, mode uint32, data []byte, rmajor, rminor uint32) error {
	name = strings.TrimPrefix(name, "/")
	if name == "" || strings.Contains(name, "\x00") {
		return fmt.Errorf("vm: initramfs entry name %q", name)
	}
	c.ino++
	nlink := uint32(1)
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	c.write([]byte(h))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
	return c.err
}

// Dir, File, Symlink and CharDev add one member each.
func (c *cpioWriter) Dir(name string) error { return c.entry(name, modeDir|0o755, nil, 0, 0) }

func (c *cpioWriter) File(name string, data []byte, perm uint32) error {
	return c.entry(name, modeFile|perm&0o7777, data, 0, 0)
}

func (c *cpioWriter) Symlink(name, target string) error {
	return c.entry(name, modeLink|0o777, []byte(target), 0, 0)
}

func (c *cpioWriter) CharDev(name string, major, minor uint32) error {
	return c.entry(name, modeChar|0o600, nil, major, minor)
}

// Close writes the trailer.
func (c *cpioWriter) Close() error {
	c.ino = 0
	return c.entry("TRAILER!!!", 0, nil, 0, 0)
}
