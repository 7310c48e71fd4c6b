// Package secretfile opens the files that hold secrets: the manager's
// token files (--token-file, --read-token-file), agents' credentials
// (--agent-credential-file), pair keys (--key-file), TLS private keys
// (--tls-key, --etcd-key, --agent-key: LoadX509KeyPair, and KeyPair,
// which re-reads them on SIGHUP), the key log `pcap unseal --key-log`
// reads, and the files dxpu writes secrets to
// (--key-log, --init-token's token file, `pcap unseal`'s decrypted
// capture). CAPool, re-read on SIGHUP with the key pairs, reads the CA
// files (--agent-ca-file, --etcd-ca-file, --manager-ca-file): they are
// public, held only to being regular files. Every reader and writer of
// such a secret file goes through Open,
// Create or Append, which make one check, on the opened descriptor
// (fstat, not the path, so a swap between the check and the use slips
// nothing in):
//
//   - Create and Append never go through a symbolic link (O_NOFOLLOW on
//     the last component): a link in a shared directory is how another
//     user makes a daemon write a secret into a file of their choosing.
//     Open follows links (Kubernetes secret volumes and secret agents
//     hand files as links to the current version), and every check below
//     applies to the file the link leads to: a link can only lead to a
//     file this process's user owns and keeps private.
//   - It is a regular file. The open is non-blocking, so a FIFO, a socket
//     or a device at the path is refused at once instead of hanging the
//     daemon before its signal handlers run; O_NONBLOCK is cleared before
//     the file is handed back.
//   - It is owned by the process's effective uid. A file someone else owns
//     is one they chose the content of, or can chmod and read, whatever its
//     mode says now: another user's 0600 token in a sticky /tmp-like
//     directory, planted before the daemon ran, is theirs, not ours. Root
//     gets no exception either way: a daemon running as root accepts only
//     root's files, and one running as a service user its own (systemd
//     DynamicUser= credentials are chowned to that user; a root-owned 0400
//     file it could not read anyway, and one shared through an ACL shows
//     the ACL's mask in its group bits and fails the mode check).
//   - Its mode gives group and others nothing (0600, 0400 or stricter).
//
// Files dxpu creates are made with O_CREAT|O_EXCL and mode 0600, so a
// file or link already at the path is never written through; Append
// opens an existing file only when it passes the same checks.
//
// Refusals are *Error: one line naming the flag, the path and what is
// wrong, e.g. "--token-file /x/tok: owned by uid 1001, not by this process
// (uid 0)". They wrap ErrSymlink, ErrNotRegular, ErrOwner or ErrMode, or
// the system's error (errors.Is(err, fs.ErrNotExist) for a missing file).
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/fabric/oneline"
)

// The reasons a file is refused; every *Error wraps one of them or the
// system's error.
var (
	ErrSymlink    = errors.New("a symbolic link")
	ErrNotRegular = errors.New("not a regular file")
	ErrOwner      = errors.New("not owned by this process's user")
	ErrMode       = errors.New("group or others may access it")
)

// Error is a refusal or failure to open a secret file.
type Error struct {
	Flag string // the flag that named the file, e.g. "--token-file"
	Path string
	What string // what is wrong, without flag or path
	Err  error  // one of the Err* reasons, or the system's error
}

func (e *Error) Error() string {
	if e.Flag == "" {
		return oneline.Name(e.Path) + ": " + e.What
	}
	return e.Flag + " " + oneline.Name(e.Path) + ": " + e.What
}

func (e *Error) Unwrap() error { return e.Err }

const (
	common = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	// reading follows a link: the checks are on the file it leads to
	reading = unix.O_NONBLOCK | unix.O_CLOEXEC
	mode    = 0o600 // of every file Create and Append make
)

// Open opens the existing secret file path for reading, after the checks
// of the package comment. flag names the file in errors.
func Open(flag, path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|reading, 0)
	if err != nil {
		return nil, openError(flag, path, err)
	}
	return finish(flag, path, fd, check)
}

// openPublic opens path for reading as Open does (not blocking on a FIFO,
// checked on the descriptor) with only the regular-file check: a file that
// holds nothing secret (a CA bundle) need not be this user's, mode 0600.
func openPublic(flag, path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|reading, 0)
	if err != nil {
		return nil, openError(flag, path, err)
	}
	return finish(flag, path, fd, regular)
}

// Create creates path, which must not exist (the error then wraps
// fs.ErrExist), as a new file of mode 0600 (less the umask) for reading
// and writing.
func Create(flag, path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|common, mode)
	if err != nil {
		return nil, openError(flag, path, err)
	}
	return finish(flag, path, fd, check)
}

// Append opens path for appending: a new file of mode 0600 when there is
// none, else the existing one if it passes the checks of Open.
func Append(flag, path string) (*os.File, error) {
	var err error
	for range 3 { // a file removed between the two opens: try again
		var fd int
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL|common, mode)
		if err == nil {
			return finish(flag, path, fd, check)
		}
		if err != unix.EEXIST {
			break
		}
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_APPEND|common, 0)
		if err == nil {
			return finish(flag, path, fd, check)
		}
		if err != unix.ENOENT {
			break
		}
	}
	return nil, openError(flag, path, err)
}

// finish checks the opened fd with ok and hands it back blocking, as an
// *os.File; on a refusal it closes fd.
func finish(flag, path string, fd int, ok func(*unix.Stat_t) error) (*os.File, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	if err == nil {
		err = ok(&st)
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		unix.Close(fd)
		return nil, describe(flag, path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// refusal is check's verdict before it is given a flag and path.
type refusal struct {
	what string
	err  error
}

func (r *refusal) Error() string { return r.what }

// regular refuses what is not a regular file.
func regular(st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &refusal{"not a regular file (" + kind(st.Mode) + ")", ErrNotRegular}
	}
	return nil
}

// check is a secret file's: regular, this user's, no access for others.
func check(st *unix.Stat_t) error {
	if err := regular(st); err != nil {
		return err
	}
	if euid := os.Geteuid(); int64(st.Uid) != int64(euid) {
		return &refusal{fmt.Sprintf("owned by uid %d, not by this process (uid %d)", st.Uid, euid), ErrOwner}
	}
	if perm := st.Mode & 0o777; perm&0o077 != 0 {
		return &refusal{fmt.Sprintf("mode %#o lets group or others read or write it; want 0600 or 0400 (chmod 600 it)", perm), ErrMode}
	}
	return nil
}

// openError describes a failed open. The open has already refused the
// file; an lstat of the path only names what is there.
func openError(flag, path string, err error) error {
	switch err {
	case unix.ELOOP, unix.EMLINK, unix.ENXIO, unix.EISDIR, unix.ETXTBSY, unix.EOPNOTSUPP:
		// ELOOP (EMLINK on BSDs): O_NOFOLLOW met a link; ENXIO: a FIFO
		// with no reader or a socket; EISDIR: a directory opened to write.
		if fi, lerr := os.Lstat(path); lerr == nil {
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				return &Error{flag, path, "a symbolic link; give the file itself", ErrSymlink}
			case !fi.Mode().IsRegular():
				return &Error{flag, path, "not a regular file (" + kind(goType(fi.Mode())) + ")", ErrNotRegular}
			}
		}
	}
	return describe(flag, path, err)
}

func describe(flag, path string, err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return &Error{flag, path, r.what, r.err}
	}
	return &Error{flag, path, err.Error(), err}
}

// goType maps an fs.FileMode's type to the S_IF* bits kind reads.
func goType(m fs.FileMode) uint32 {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return unix.S_IFIFO
	case m&fs.ModeSocket != 0:
		return unix.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		return unix.S_IFCHR
	case m&fs.ModeDevice != 0:
		return unix.S_IFBLK
	case m.IsDir():
		return unix.S_IFDIR
	case m&fs.ModeSymlink != 0:
		return unix.S_IFLNK
	}
	return unix.S_IFREG
}

func kind(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("file type %#o", m&unix.S_IFMT)
}
