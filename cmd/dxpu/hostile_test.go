package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// The test binary doubles as dxpu for the tests that need a process of
// their own (a fault kills the process; peak memory is the process's): with
// DXPU_TEST_AS_DXPU=1 it runs its arguments as dxpu's command line, then
// writes its peak RSS (VmHWM, kB) to the file DXPU_TEST_HWM names. (The
// rusage of the child is no measure: Linux counts in it the peak of the
// test process it was forked from.)
func TestMain(m *testing.M) {
	if os.Getenv("DXPU_TEST_AS_DXPU") == "1" {
		code := run(context.Background(), newEnv(os.Stdin, os.Stdout, os.Stderr, os.Args[1:], noEnv))
		if status, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, l := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
					os.WriteFile(os.Getenv("DXPU_TEST_HWM"), []byte(strings.TrimSpace(strings.TrimSuffix(v, "kB"))), 0o600)
				}
			}
		}
		os.Exit(code)
	}
	code := m.Run()
	if dir := builtBinDir.Load(); dir != nil {
		os.RemoveAll(*dir) // the dxpu built for the docs
	}
	os.Exit(code)
}

// proc is what a dxpu process left behind.
type proc struct {
	stdout, stderr string
	code           int
	maxRSSMiB      int64
}

// dxpuProcess runs dxpu's command line in a process of its own. stop, when
// not empty, is a text on stderr (the daemon serves) after which it is sent
// SIGTERM.
func dxpuProcess(t *testing.T, stop string, args ...string) proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	hwm := filepath.Join(t.TempDir(), "hwm")
	cmd.Env = append(os.Environ(), "DXPU_TEST_AS_DXPU=1", "DXPU_TEST_HWM="+hwm)
	var out bytes.Buffer
	var errb syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	exited := make(chan struct{})
	if stop != "" {
		go func() {
			select {
			case <-errb.Await(stop):
				cmd.Process.Signal(syscall.SIGTERM)
			case <-exited:
			}
		}()
	}
	// A hang is no output and no CPU for a while (bad input must not
	// hang), not a slow run on a loaded machine.
	err := waitfor.Command(cmd, waitfor.CommandStall)
	close(exited)
	if se := (*waitfor.StallError)(nil); errors.As(err, &se) {
		t.Fatalf("dxpu %v: %v; stderr:\n%s", args, err, errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	p := proc{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
	if b, err := os.ReadFile(hwm); err == nil {
		kB, _ := strconv.ParseInt(string(b), 10, 64)
		p.maxRSSMiB = kB >> 10
	}
	return p
}

func lines(s string) []string {
	if s = strings.TrimSuffix(s, "\n"); s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestManagerDamagedStore runs `dxpu manager` on store files that are not
// sound: one line saying what is wrong with which file and what to do, exit
// status 1 (a store cut short used to kill it with SIGBUS and 159 lines of
// stack). An empty file becomes a new store.
func TestManagerDamagedStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	s, err := store.OpenBolt(good, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ops []store.Op
	for i := range 200 {
		ops = append(ops, store.Put(fmt.Sprintf("box/b%03d", i), bytes.Repeat([]byte("x"), 100)))
	}
	if err := errors.Join(s.Apply(context.Background(), ops...), s.Close()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(good)
	garbage := make([]byte, 50000)
	for i := range garbage {
		garbage[i] = byte(i*7 + i>>8)
	}
	for _, tc := range []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"cut", "cut.db", b[:20000], "cut.db is damaged: file is 20000 bytes but its meta page"},
		{"garbage", "garbage.db", garbage, "garbage.db is damaged: not a bbolt file"},
	} {
		path := filepath.Join(dir, tc.file)
		os.WriteFile(path, tc.data, 0o600)
		p := dxpuProcess(t, "", "manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", path)
		var msgs []string
		for _, l := range lines(p.stderr) {
			if !strings.Contains(l, "authentication disabled") { // the --no-auth warning
				msgs = append(msgs, l)
			}
		}
		if p.code != 1 || len(msgs) != 1 || !strings.HasPrefix(msgs[0], "dxpu: store: ") ||
			!strings.Contains(msgs[0], tc.want) || !strings.HasSuffix(msgs[0], "restore it from a backup, or move it aside to start with an empty pool") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and one line saying %q and what to do", tc.name, p.code, p.stderr, tc.want)
		}
	}

	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	p := dxpuProcess(t, "manager serving", "manager", "--no-auth", "--listen", "127.0.0.1:0", "--store", empty)
	if p.code != 0 || !strings.Contains(p.stderr, "manager serving") {
		t.Fatalf("empty store: exit %d, stderr:\n%s", p.code, p.stderr)
	}
	if err := store.CheckBoltFile(empty); err != nil {
		t.Fatalf("the empty file did not become a store: %v", err)
	}
}

// gzipMembers writes a gzip file of first, then n members that each inflate
// to chunk: a few MB that inflate to gigabytes, made in no time (a gzip
// reader reads concatenated members as one stream).
func gzipMembers(t *testing.T, path string, first []byte, n int, chunk []byte) {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	out := bytes.Clone(member(first))
	m := member(chunk)
	for range n {
		out = append(out, m...)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHostileCaptures runs the capture commands on captures built to flood
// them: a 1M-frame gzip of frames too short for Ethernet, and a 4 MB gzip
// that inflates to 4 GiB of zeros, with and without a pcap header before
// them. Each prints at most 1000 error lines and a count (plus dxpu's error
// line and the result line); replay, as a process, stays under 100 MiB of memory (it loaded
// every record: 360 MiB for the first file, past 2 GiB for the second);
// the zeros fail at their first record.
func TestHostileCaptures(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a million frames several times")
	}
	t.Parallel()
	dir := t.TempDir()
	var hdr bytes.Buffer
	w, _ := pcapio.NewWriter(&hdr, pcapio.WriterOptions{})
	w.Close()
	garbage := filepath.Join(dir, "garbage.pcap.gz")
	var recs bytes.Buffer
	w, _ = pcapio.NewWriter(&recs, pcapio.WriterOptions{})
	for range 10_000 {
		w.WritePacket(gopacket.CaptureInfo{}, []byte{0xde, 0xad, 0xbe})
	}
	w.Close()
	gzipMembers(t, garbage, recs.Bytes(), 99, recs.Bytes()[hdr.Len():]) // 100 x 10,000 frames
	zeros := filepath.Join(dir, "zeros.pcap.gz")
	gzipMembers(t, zeros, hdr.Bytes(), 4096, make([]byte, 1<<20))
	bare := filepath.Join(dir, "zeros.gz")
	gzipMembers(t, bare, nil, 4096, make([]byte, 1<<20))
	if st, _ := os.Stat(zeros); st.Size() < 4<<20 {
		t.Fatalf("%s is %d bytes, want 4 MB", zeros, st.Size())
	}
	table := filepath.Join("..", "..", "testdata", "switch", "corpus-table.json")

	for _, in := range []string{garbage, zeros, bare} {
		for _, args := range [][]string{
			{"pcap", "info", in},
			{"pcap", "convert", "--in", in, "--out", filepath.Join(dir, "out.pcap"), "--to", "dxpu-eth"},
			{"tlp", "decode", "--pcap", in},
			{"replay", "--pcap", in, "--table", table},
		} {
			var out strings.Builder
			var errb syncbuf.Buffer
			code := run(context.Background(), newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
			no, ne := len(lines(out.String())), len(lines(errb.String()))
			n := no + ne
			t.Logf("dxpu %v: exit %d, %d lines on stdout, %d on stderr", args, code, no, ne)
			// At most 1000 error lines, a count of the rest and dxpu's
			// error, plus the result: a line of convert, the block of
			// pcap info (a line per group, at most 7).
			if ne > 1002 || no > 1001 || n > 1009 {
				t.Errorf("dxpu %v: %d lines on stdout, %d on stderr, want at most 1009 in all", args, no, ne)
			}
			if in == garbage {
				if code != 1 && args[0] != "replay" {
					t.Errorf("dxpu %v: exit %d, want 1 (frames did not parse)", args, code)
				}
				if ls := lines(errb.String()); args[0] == "pcap" && (len(ls) != 1002 || !strings.HasPrefix(ls[1000], "999000 more frames")) {
					t.Errorf("dxpu %v: stderr ends %q, want 1000 frames, a count of the rest and the error", args, ls[max(0, len(ls)-3):])
				}
				continue
			}
			if code == 0 || n != 1 || !strings.Contains(errb.String(), in+": ") {
				t.Errorf("dxpu %v: exit %d, %d lines:\n%s%s\nwant one error naming the file", args, code, n, out.String(), errb.String())
			}
		}
		p := dxpuProcess(t, "", "replay", "--pcap", in, "--table", table)
		t.Logf("replay %s as a process: exit %d, peak RSS %d MiB", in, p.code, p.maxRSSMiB)
		if p.maxRSSMiB == 0 || p.maxRSSMiB > 100 {
			t.Errorf("replay %s: peak RSS %d MiB, want under 100", in, p.maxRSSMiB)
		}
		if in == garbage && (p.code != 0 || !strings.Contains(p.stdout, "1000000 frames, 0 forwarded")) {
			t.Errorf("replay %s: exit %d, %s%s", in, p.code, p.stdout, p.stderr)
		}
	}
}
