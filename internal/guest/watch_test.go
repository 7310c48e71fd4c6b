package guest

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
)

// addGPU puts a function with vendor 10de into root at once (renamed in
// from a staging directory): memory and bus master enabled in its config
// space, and a resource0 whose BOOT_0 register holds boot0.
func addGPU(t *testing.T, root, bdf string, boot0 uint32) {
	t.Helper()
	addGPUHoldingBAR(t, root, bdf, boot0, false)
}

// addGPUHoldingBAR is addGPU that, with hold, leaves resource0 out and
// returns a function that puts it in: the kernel makes a hot-added
// function's resourceN files after its directory.
func addGPUHoldingBAR(t *testing.T, root, bdf string, boot0 uint32, hold bool) (putBAR func() error) {
	t.Helper()
	stage := filepath.Join(t.TempDir(), bdf)
	if err := os.MkdirAll(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := make([]byte, 256)
	copy(cfg, "\xde\x10\x30\x23")
	cfg[4] = CmdMemory | CmdBusMaster
	bar := make([]byte, 1<<16)
	binary.LittleEndian.PutUint32(bar[gpu.RegBoot0:], boot0)
	for name, v := range map[string][]byte{"vendor": []byte("0x10de\n"), "device": []byte("0x2330\n"), "class": []byte("0x030200\n"),
		"resource": []byte(gpuResource), "config": cfg, "resource0": bar} {
		if err := os.WriteFile(filepath.Join(stage, name), v, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	held := filepath.Join(t.TempDir(), "resource0")
	if hold {
		if err := os.Rename(filepath.Join(stage, "resource0"), held); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(stage, filepath.Join(root, bdf)); err != nil {
		t.Fatal(err)
	}
	return func() error { return os.Rename(held, filepath.Join(root, bdf, "resource0")) }
}

// startWatch runs Watch on root, polling every millisecond. next takes
// its next event line, which must be a want event, and returns it; stop
// ends the watch and returns Watch's error.
func startWatch(t *testing.T, root string) (next func(want string) map[string]any, stop func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, WatchOptions{Root: root, Interval: time.Millisecond, Events: pw})
		pw.Close()
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		go io.Copy(io.Discard, pr) // an event written as the context ends
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	lines := bufio.NewScanner(pr)
	return func(want string) map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("no %s event: %v", want, lines.Err())
		}
		var ev map[string]any
		line, ok := strings.CutPrefix(lines.Text(), EventPrefix)
		if err := json.Unmarshal([]byte(line), &ev); !ok || err != nil || ev["event"] != want {
			t.Fatalf("line %q, want a %s event", lines.Text(), want)
		}
		return ev
	}, stop
}

// TestWatch: Watch lists what is there, reports a GPU that appears with
// the BOOT_0 it reads through BAR0, one whose registers read all ones
// with an error, and each removal; it stops when its context ends.
func TestWatch(t *testing.T) {
	t.Parallel()
	root := fakeSysfs(t, map[string][4]string{"0000:00:00.0": {"0x8086", "0x29c0", "0x060000", ""}})
	next, stop := startWatch(t, root)
	if fns := next("watching")["functions"].([]any); len(fns) != 1 {
		t.Fatalf("watching %v", fns)
	}
	addGPU(t, root, "0000:01:00.0", 0x180000a1)
	ev := next("added")
	if ev["bdf"] != "0000:01:00.0" || ev["vendor"] != "10de" || ev["device"] != "2330" || ev["class"] != "0302" ||
		ev["bar0"] != "0xfc000000" || ev["boot0"] != "0x180000a1" || ev["error"] != nil {
		t.Fatalf("added %v", ev)
	}
	addGPU(t, root, "0000:02:00.0", 0xffff_ffff)
	if ev := next("added"); ev["bdf"] != "0000:02:00.0" || ev["boot0"] != nil || !strings.Contains(ev["error"].(string), "all ones") {
		t.Fatalf("added (gone) %v", ev)
	}
	if err := os.RemoveAll(filepath.Join(root, "0000:01:00.0")); err != nil {
		t.Fatal(err)
	}
	if ev := next("removed"); ev["bdf"] != "0000:01:00.0" {
		t.Fatalf("removed %v", ev)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v after its context ended", err)
	}
}

// TestWatchWaitsForBARFiles: a hot-added function whose resource0 shows
// after its directory (the kernel's order; a guest under load saw the
// watcher fail to open it) is reported once it is there, with its BOOT_0.
// Without the wait the watcher, polling every millisecond, reports it
// with the open's error first.
func TestWatchWaitsForBARFiles(t *testing.T) {
	t.Parallel()
	root := fakeSysfs(t, map[string][4]string{"0000:00:00.0": {"0x8086", "0x29c0", "0x060000", ""}})
	next, stop := startWatch(t, root)
	next("watching")
	putBAR := addGPUHoldingBAR(t, root, "0000:01:00.0", 0x180000a1, true)
	added := make(chan error, 1)
	go func() { time.Sleep(30 * time.Millisecond); added <- putBAR() }() // some 30 polls later
	if ev := next("added"); ev["boot0"] != "0x180000a1" || ev["error"] != nil {
		t.Fatalf("added %v: want BOOT_0 0x180000a1, read once resource0 was there", ev)
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	_ = stop()
}

// TestWatchNoBus: a root that is not there is an error naming it.
func TestWatchNoBus(t *testing.T) {
	t.Parallel()
	err := Watch(context.Background(), WatchOptions{Root: filepath.Join(t.TempDir(), "none")})
	if err == nil || !strings.Contains(err.Error(), "listing PCI functions") {
		t.Fatalf("Watch on a missing bus: %v", err)
	}
}
