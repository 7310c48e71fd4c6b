package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/privtest"
)

// within runs f and fails the test if it has not returned in 5s: an open
// that blocks (a FIFO) must fail by progress, not hang the test binary.
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("still blocked after 5s")
		return nil
	}
}

func write(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

type opener struct {
	name string
	open func(flag, path string) (*os.File, error)
}

var openers = []opener{{"Open", Open}, {"Append", Append}}

func refused(t *testing.T, name string, err error, reason error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want a refusal %q", name, msg)
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, reason) || err.Error() != msg {
		t.Errorf("%s: %q (%T), want %q wrapping %v", name, err, err, msg, reason)
	}
}

func TestOpenReadsAndIsBlocking(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tok")
	write(t, path, "tok\n", 0o400)
	f, err := Open("--token-file", path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("flags %#x %v: O_NONBLOCK left set", fl, err)
	}
	if fd, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil || fd&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd flags %#x %v: want FD_CLOEXEC", fd, err)
	}
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "tok\n" {
		t.Fatalf("read %q %v", b, err)
	}
	_, err = Open("--token-file", filepath.Join(filepath.Dir(path), "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "--token-file ") {
		t.Errorf("missing: %v, want fs.ErrNotExist naming the flag", err)
	}
}

// TestRefusesFIFO: a FIFO at the path is refused at once (it hung the
// daemon, finding F6), for reading and for appending, with and without a
// writer or reader at the other end.
func TestRefusesFIFO(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "k")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range openers {
		err := within(t, func() error { _, err := o.open("--key-log", path); return err })
		refused(t, o.name, err, ErrNotRegular, "--key-log "+path+": not a regular file (a FIFO)")
	}
	// With a reader holding the FIFO open, the write open succeeds and
	// fstat refuses it.
	r, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = within(t, func() error { _, err := Append("--key-log", path); return err })
	refused(t, "Append with a reader", err, ErrNotRegular, "--key-log "+path+": not a regular file (a FIFO)")
}

func TestRefusesDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, o := range openers {
		_, err := o.open("--key-file", dir)
		refused(t, o.name, err, ErrNotRegular, "--key-file "+dir+": not a regular file (a directory)")
	}
}

// TestRefusesSymlink: Append refuses a link at the path, to a good file or
// to none (it must not create the file a dangling link names); Open
// follows a link to a good file, and refuses one that leads nowhere or (as
// root) to another user's file.
func TestRefusesSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "real")
	write(t, target, "x\n", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "planted"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, dangling} {
		_, err := Append("--key-log", p)
		refused(t, "Append "+filepath.Base(p), err, ErrSymlink, "--key-log "+p+": a symbolic link; give the file itself")
	}
	if f, err := Open("--key-file", link); err != nil {
		t.Errorf("Open through a link to a good file: %v", err)
	} else {
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "x\n" {
			t.Errorf("Open through a link read %q", b)
		}
	}
	if _, err := Open("--key-file", dangling); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open through a dangling link: %v, want fs.ErrNotExist", err)
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		write(t, theirs, "x\n", 0o600)
		if err := os.Chown(theirs, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		toTheirs := filepath.Join(dir, "to-theirs")
		if err := os.Symlink(theirs, toTheirs); err != nil {
			t.Fatal(err)
		}
		_, err := Open("--key-file", toTheirs)
		refused(t, "Open through a link to another user's file", err, ErrOwner, "--key-file "+toTheirs+": owned by uid 1001, not by this process (uid 0)")
	}
	if _, err := Create("--key-log", dangling); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create through a dangling link: %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "planted")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
}

func TestRefusesOpenModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o602, 0o644, 0o660, 0o700 | 0o010} {
		path := filepath.Join(dir, "m"+mode.String())
		write(t, path, "x", mode)
		for _, o := range openers {
			_, err := o.open("--token-file", path)
			want := "--token-file " + path + ": mode " + fmt.Sprintf("%#o", uint32(mode)) + " lets group or others read or write it; want 0600 or 0400 (chmod 600 it)"
			refused(t, o.name, err, ErrMode, want)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400, 0o200} {
		path := filepath.Join(dir, "ok"+mode.String())
		write(t, path, "x", mode)
		open := Open
		if mode == 0o200 {
			open = Append
		}
		f, err := open("--token-file", path)
		if err != nil {
			t.Errorf("mode %#o: %v", mode, err)
			continue
		}
		f.Close()
	}
}

// TestRefusesOtherOwner: a 0600 file of another user (uid 1001), the
// token planted in a shared directory of finding F5, is refused for
// reading and for appending.
func TestRefusesOtherOwner(t *testing.T) {
	privtest.Root(t)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tok")
	write(t, path, "attackerchosentoken\n", 0o600)
	if err := os.Chown(path, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	for _, o := range openers {
		_, err := o.open("--token-file", path)
		refused(t, o.name, err, ErrOwner, "--token-file "+path+": owned by uid 1001, not by this process (uid 0)")
	}
	if b, _ := os.ReadFile(path); string(b) != "attackerchosentoken\n" {
		t.Errorf("the refused file was written: %q", b)
	}
}

// TestCreateAndAppendMake0600: new files are 0600 whatever the umask
// allows; Create never opens an existing file; Append appends.
func TestCreateAndAppendMake0600(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := filepath.Join(dir, "c")
	f, err := Create("--token-file", c)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("a")
	f.Close()
	if _, err := Create("--token-file", c); !errors.Is(err, fs.ErrExist) || !strings.HasPrefix(err.Error(), "--token-file "+c+": ") {
		t.Errorf("second Create: %v, want fs.ErrExist naming flag and path", err)
	}
	a := filepath.Join(dir, "a")
	for _, s := range []string{"1\n", "2\n"} {
		f, err := Append("--key-log", a)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	for _, p := range []string{c, a} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode() != 0o600 {
			t.Errorf("%s: %v %v, want a 0600 file", p, fi.Mode(), err)
		}
	}
	if b, _ := os.ReadFile(a); string(b) != "1\n2\n" {
		t.Errorf("appended %q", b)
	}
}
