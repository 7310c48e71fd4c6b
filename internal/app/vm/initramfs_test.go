package vm

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeELF writes a minimal x86-64 ELF executable: with a PT_INTERP
// program header when dynamic (a program that needs a loader), else none.
func fakeELF(t *testing.T, dynamic bool) string {
	t.Helper()
	le := binary.LittleEndian
	h := make([]byte, 64, 256)
	copy(h, "\x7fELF\x02\x01\x01")
	le.PutUint16(h[16:], 2)    // ET_EXEC
	le.PutUint16(h[18:], 0x3e) // x86-64
	le.PutUint32(h[20:], 1)
	le.PutUint16(h[52:], 64)
	le.PutUint16(h[54:], 56)
	le.PutUint16(h[58:], 64)
	if dynamic {
		le.PutUint64(h[32:], 64) // e_phoff
		le.PutUint16(h[56:], 1)  // e_phnum
		ph := make([]byte, 56)
		le.PutUint32(ph[0:], 3) // PT_INTERP
		le.PutUint64(ph[8:], 120)
		le.PutUint64(ph[32:], 8)
		le.PutUint64(ph[40:], 8)
		h = append(append(h, ph...), "/lib/ld\x00"...)
	}
	h = append(h, "payload"...)
	p := filepath.Join(t.TempDir(), "prog")
	writeExecutable(t, p, h)
	return p
}

type cpioEntry struct {
	mode         uint32
	rmaj, rmin   uint32
	data         []byte
	headerOffset int
}

// readNewc parses a newc archive independently of the writer, checking
// the magic and 4-byte alignment of names and data.
func readNewc(t *testing.T, b []byte) map[string]cpioEntry {
	t.Helper()
	out := map[string]cpioEntry{}
	for off := 0; ; {
		if off%4 != 0 || off+110 > len(b) || string(b[off:off+6]) != "070701" {
			t.Fatalf("no header at %d", off)
		}
		field := func(i int) uint32 {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("header at %d field %d: %v", off, i, err)
			}
			return uint32(v)
		}
		mode, size, rmaj, rmin, nlen := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(nlen)-1])
		if b[off+110+int(nlen)-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		d := (off + 110 + int(nlen) + 3) &^ 3
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = cpioEntry{mode: mode, rmaj: rmaj, rmin: rmin, data: b[d : d+int(size)], headerOffset: off}
		off = (d + int(size) + 3) &^ 3
	}
}

// TestInitramfs: the archive holds busybox and its applet links, the
// guest tool, /dev/console and an /init that runs the tool with its
// arguments quoted; gzip or not.
func TestInitramfs(t *testing.T) {
	t.Parallel()
	self := fakeELF(t, false)
	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		if err := WriteInitramfs(&buf, InitramfsConfig{Busybox: self, GuestTool: self, GuestArgs: []string{"--bytes", "1 2'3"}, Gzip: gz}); err != nil {
			t.Fatal(err)
		}
		raw := buf.Bytes()
		if gz {
			zr, err := gzip.NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if raw, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		ents := readNewc(t, raw)
		want, _ := os.ReadFile(self)
		if e := ents["bin/busybox"]; e.mode != modeFile|0o755 || !bytes.Equal(e.data, want) {
			t.Errorf("bin/busybox: mode %o, %d bytes", e.mode, len(e.data))
		}
		if e := ents["bin/sh"]; e.mode&0o170000 != modeLink || string(e.data) != "busybox" {
			t.Errorf("bin/sh: %+v", e)
		}
		if e := ents["dev/console"]; e.mode&0o170000 != modeChar || e.rmaj != 5 || e.rmin != 1 {
			t.Errorf("dev/console: %+v", e)
		}
		init := string(ents["init"].data)
		if !strings.HasPrefix(init, "#!/bin/sh\n") || !strings.Contains(init, `/bin/dxpu-guest run --console '--bytes' '1 2'\''3'`) || !strings.Contains(init, "poweroff -f") {
			t.Errorf("init:\n%s", init)
		}
	}
}

// TestInitramfsRefusesDynamicPrograms: a program needing a loader would not
// run from the initramfs: ErrNotStatic naming it.
func TestInitramfsRefusesDynamicPrograms(t *testing.T) {
	t.Parallel()
	dyn, self := fakeELF(t, true), fakeELF(t, false)
	err := WriteInitramfs(io.Discard, InitramfsConfig{Busybox: dyn, GuestTool: self})
	if !errors.Is(err, ErrNotStatic) || !strings.Contains(err.Error(), dyn) {
		t.Fatalf("%v, want ErrNotStatic naming %s", err, dyn)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	writeExecutable(t, notELF, []byte("#!/bin/sh\n"))
	if err := WriteInitramfs(io.Discard, InitramfsConfig{Busybox: self, GuestTool: notELF}); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("a script as the guest tool: %v", err)
	}
}
