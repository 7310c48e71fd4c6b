package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/guest"
)

// TestListAndConfig: list prints the functions as JSON, config the config
// space in hex; bad commands exit 2 with usage.
func TestListAndConfig(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "0000:01:00.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"vendor": "0x10de\n", "device": "0x2330\n", "class": "0x030200\n",
		"resource": "0xfc000000 0xfcffffff 0x40200\n", "config": "\xde\x10\x30\x23"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DXPU_SYSFS_PCI", root)
	var out, errb bytes.Buffer
	if code := run([]string{"list"}, &out, &errb); code != 0 {
		t.Fatalf("list: exit %d: %s", code, errb.String())
	}
	var fns []guest.Function
	if err := json.Unmarshal(out.Bytes(), &fns); err != nil || len(fns) != 1 || fns[0].Device != "2330" || fns[0].Class != "0302" {
		t.Fatalf("list printed %s (%v)", out.String(), err)
	}
	out.Reset()
	if code := run([]string{"config", "0000:01:00.0"}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != "de103023" {
		t.Fatalf("config: exit %d, %q", code, out.String())
	}
	for _, args := range [][]string{nil, {"frob"}, {"config"}, {"run", "--no-such-flag"}} {
		errb.Reset()
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestRunWithoutGPU: no NVIDIA function is an error in the report and
// exit status 1, between the console markers.
func TestRunWithoutGPU(t *testing.T) {
	t.Setenv("DXPU_SYSFS_PCI", t.TempDir())
	var out, errb bytes.Buffer
	if code := run([]string{"run", "--console"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	s := out.String()
	b, _, ok := strings.Cut(s, guest.ResultBegin+"\n")
	if !ok || !strings.HasPrefix(b, guest.EventPrefix) {
		t.Fatalf("output %q", s)
	}
	body, _, _ := strings.Cut(s[len(b)+len(guest.ResultBegin)+1:], guest.ResultEnd)
	var rep guest.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil || !strings.Contains(rep.Error, "no such PCI function") {
		t.Fatalf("report %q (%v)", body, err)
	}
}

// TestWatchWithoutBus: run --watch on a bus that cannot be listed exits 1
// with the reason.
func TestWatchWithoutBus(t *testing.T) {
	t.Setenv("DXPU_SYSFS_PCI", filepath.Join(t.TempDir(), "none"))
	var out, errb bytes.Buffer
	if code := run([]string{"run", "--console", "--watch"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "listing PCI functions") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
