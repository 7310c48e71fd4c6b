package vm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// privateDir makes dir the VM's directory: created 0700 when missing, and
// refused when it exists and others may enter it. QEMU creates its QMP
// socket there under its umask; a group-writable socket in a directory
// others can reach lets them drive root's QEMU (device_add, memory dumps),
// so only the directory's mode closes that for certain.
func privateDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("vm: directory %s: %w", dir, err)
		}
		// MkdirAll's mode goes through the umask; make it exactly 0700.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("vm: directory %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("vm: directory %s: %w", dir, err)
	case !st.IsDir():
		return fmt.Errorf("vm: directory %s: not a directory", dir)
	case st.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("vm: directory %s has mode %04o: others could reach QEMU's QMP socket in it; want 0700 (chmod 700 it, or name a new directory)", dir, st.Mode().Perm())
	}
	return nil
}

// createPrivate creates (or truncates) the file at path with mode 0600,
// whatever the umask and whatever mode an existing file had.
func createPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
