package progress

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// use drives a bar through every call a command makes.
func use(b *Bar) {
	b.Describe("phase one")
	b.Add(1)
	b.Describe("phase two")
	b.Add(2)
	b.Finish()
	b.Finish()
}

// TestQuietOffTerminal: where stderr is a buffer, a pipe or a file, a
// bar or spinner writes nothing at all.
func TestQuietOffTerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	for _, total := range []int{3, -1} {
		b := New(&buf, total, "work")
		if b != nil {
			t.Errorf("New over a buffer: %v, want nil", b)
		}
		use(b)
	}
	if buf.Len() != 0 {
		t.Errorf("a bar over a buffer wrote %q", buf.String())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, total := range []int{3, -1} {
		use(New(w, total, "work"))
	}
	w.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if got.Len() != 0 {
		t.Errorf("a bar over a pipe wrote %q", got.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	use(New(f, 3, "work"))
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		t.Errorf("a bar over a file wrote %d bytes (%v)", st.Size(), err)
	}
	f.Close()
}

// TestDrawsOnTerminal: on a terminal (a pseudo-terminal here) the bar
// draws its description, so the quiet test above cannot pass by a bar
// that never draws.
func TestDrawsOnTerminal(t *testing.T) {
	t.Parallel()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	defer pts.Close()
	b := New(pts, 3, "copying")
	if b == nil {
		t.Fatal("New over a terminal returned nil")
	}
	b.Add(1)
	b.Finish()
	// The bar has written by now; the read returns what it wrote.
	if err := ptm.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Skipf("no read deadline on the pseudo-terminal: %v", err)
	}
	buf := make([]byte, 4096)
	k, err := ptm.Read(buf)
	if !bytes.Contains(buf[:k], []byte("copying")) {
		t.Errorf("the terminal got %q (%v), want the description", buf[:k], err)
	}
}
