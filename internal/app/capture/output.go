package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// output is a capture being written for a command's --out. It goes to a
// temporary file beside the path, and commit renames that over the path:
// a command that fails or is interrupted leaves the path as it was (an
// earlier capture, or nothing) rather than a truncated capture, and an
// --out that happens to be an input is not clobbered while it is read.
type output struct {
	*pcapio.Writer
	path string   // what the user named
	dest string   // path, or the file a symbolic link at path names
	f    *os.File // the temporary file; nil when writing to path itself
	mode fs.FileMode
	// secret: the capture is as secret as keys (unseal's decrypted
	// frames): the file is made by secretfile.Create, mode 0600.
	secret bool
	done   bool
}

// createOutput starts writing a capture for path. The caller defers
// abort (a no-op after commit) and calls commit once everything is
// written.
func createOutput(path string, wo pcapio.WriterOptions) (*output, error) {
	return createOutputMode(path, wo, false)
}

// createSecretOutput is createOutput for a capture as secret as the keys
// that opened it (unseal's OUT): the new file, which replaces a regular
// file at path, is made by secretfile.Create (O_CREAT|O_EXCL, mode 0600
// less the umask, whatever the mode of the file it replaces). A device or
// pipe at path (a stream the user named) is written as it is.
func createSecretOutput(path string, wo pcapio.WriterOptions) (*output, error) {
	return createOutputMode(path, wo, true)
}

func createOutputMode(path string, wo pcapio.WriterOptions, secret bool) (*output, error) {
	o := &output{path: path, dest: path, mode: 0o666, secret: secret}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("%s is a directory: want a file name", path)
	case err == nil && !fi.Mode().IsRegular():
		// A device or pipe (/dev/null, a FIFO): renaming over it would
		// replace it, so write to it as it is.
		w, err := pcapio.Create(path, wo)
		if err != nil {
			return nil, err
		}
		o.Writer = w
		return o, nil
	case err == nil:
		// Replace the file a link names, not the link; keep its mode.
		if o.dest, err = filepath.EvalSymlinks(path); err != nil {
			return nil, err
		}
		o.mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	var f *os.File
	if secret {
		f, err = createSecretTemp(o.dest)
	} else {
		f, err = createTemp(o.dest, o.mode)
	}
	if err != nil {
		return nil, err
	}
	w, err := pcapio.NewWriter(f, wo)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	o.Writer, o.f = w, f
	return o, nil
}

// createTemp creates an empty file beside dest for writing, with mode
// (less the umask, as os.Create does for a new file).
func createTemp(dest string, mode fs.FileMode) (*os.File, error) {
	for range 100 {
		name := dest + ".tmp-" + strconv.FormatUint(rand.Uint64()%1e9, 10)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", dest, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("creating %s: no free temporary name beside it", dest)
}

// createSecretTemp is createTemp for a secret file: secretfile.Create,
// mode 0600.
func createSecretTemp(dest string) (*os.File, error) {
	for range 100 {
		name := dest + ".tmp-" + strconv.FormatUint(rand.Uint64()%1e9, 10)
		f, err := secretfile.Create("", name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", dest, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("creating %s: no free temporary name beside it", dest)
}

// commit finishes the capture and puts it in place.
func (o *output) commit() error {
	o.done = true
	err := o.Writer.Close() // flushes; closes only a file pcapio.Create opened
	if o.f == nil {
		return err
	}
	tmp := o.f.Name()
	if err == nil {
		err = o.f.Sync() // the data is on disk before the name points at it
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, o.dest)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", o.path, err)
	}
	return nil
}

// abort drops the capture: the path keeps what it had.
func (o *output) abort() {
	if o == nil || o.done {
		return
	}
	o.done = true
	o.Writer.Close()
	if o.f != nil {
		o.f.Close()
		os.Remove(o.f.Name())
	}
}

// writeFile is os.WriteFile by way of a temporary file: a failed write
// leaves path as it was.
func writeFile(path string, data []byte) error {
	f, err := createTemp(path, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// sameFile refuses an output path that names an input (the same file by
// any name: a link, another spelling): writing it would destroy the
// input. Paths that do not exist yet are different files.
func sameFile(cmd, outName, out, inName, in string) error {
	fo, err1 := os.Stat(out)
	fi, err2 := os.Stat(in)
	if err1 == nil && err2 == nil && os.SameFile(fo, fi) {
		return apperr.Usage(fmt.Errorf("%s: %s %s is the same file as %s %s: write the output elsewhere", cmd, outName, out, inName, in))
	}
	return nil
}

// Output is a capture written for a path as the pcap commands write
// theirs, for other commands that write captures (replay --out): beside
// the path, put in place whole by Commit, dropped by Abort, so a failed
// run leaves the path as it was.
type Output struct{ *output }

// CreateOutput starts writing a capture for path; defer Abort (a no-op
// after Commit).
func CreateOutput(path string, wo pcapio.WriterOptions) (*Output, error) {
	o, err := createOutput(path, wo)
	if err != nil {
		return nil, err
	}
	return &Output{o}, nil
}

// Commit finishes the capture and puts it in place.
func (o *Output) Commit() error { return o.commit() }

// Abort drops the capture: the path keeps what it had.
func (o *Output) Abort() { o.abort() }

// SameFile refuses an output path that names an input, the same file by
// any name; cmd, outName and inName name them in the error.
func SameFile(cmd, outName, out, inName, in string) error {
	return sameFile(cmd, outName, out, inName, in)
}
