package main

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
)

// runCtl runs `dxpu ctl ...` in a command tree of its own.
func runCtl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, errb, err := runDxpu(t, "", append([]string{"ctl"}, args...)...)
	return out + errb, err
}

func TestCtl(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte("tok\n"), 0o600)
	boxFile := filepath.Join(dir, "box.json")
	os.WriteFile(boxFile, []byte(`{"id":"box0","bridge":{"switch_port":"veth-b0","mac":"02:00:00:00:01:00"},"location":{"pod":"p","rack":"r"},
	  "gpus":[{"id":"g0","model":"H100","memory_mib":81920},{"id":"g1","model":"H100","memory_mib":81920},{"id":"g2","model":"A100","memory_mib":40960}]}`), 0o600)
	hostFile := filepath.Join(dir, "host.json")
	os.WriteFile(hostFile, []byte(`{"id":"h1","bridge":{"switch_port":"veth-h1","mac":"02:00:00:00:02:01"},"ports":32}`), 0o600)
	base := []string{"--manager", srv.URL, "--token-file", tokFile}

	// Without the token: refused, exit status 1.
	_, err = runCtl(t, "--manager", srv.URL, "box", "add", boxFile)
	var ec exitCodeError
	if !errors.As(err, &ec) || ec.code != 1 || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("no token: %v", err)
	}
	if _, err := runCtl(t, append(base, "box", "add", boxFile)...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCtl(t, append(base, "host", "add", hostFile)...); err != nil {
		t.Fatal(err)
	}
	out, err := runCtl(t, append(base, "alloc", "--host", "h1", "--count", "2", "--model", "H100", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var a pool.Allocation
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.ID == "" || len(a.GPUs) != 2 || a.GPUs[0].GPU != "g0" {
		t.Fatalf("alloc --json printed %q (%v)", out, err)
	}
	out, _ = runCtl(t, append(base, "box")...)
	if !strings.Contains(out, "box0") || !strings.Contains(out, "FREE") {
		t.Fatalf("box table: %q", out)
	}
	out, _ = runCtl(t, append(base, "gpu", "--state", "free")...)
	if !strings.Contains(out, "g2") || strings.Contains(out, "g0 ") {
		t.Fatalf("free GPUs: %q", out)
	}
	out, _ = runCtl(t, append(base, "alloc", "list")...)
	if !strings.Contains(out, a.ID) || !strings.Contains(out, "g0,g1") {
		t.Fatalf("alloc list: %q", out)
	}
	out, _ = runCtl(t, append(base, "drain", "box0")...)
	if !strings.Contains(out, "draining") || !strings.Contains(out, a.ID) {
		t.Fatalf("drain: %q", out)
	}
	_, err = runCtl(t, append(base, "alloc", "--host", "h1", "--count", "1")...)
	if !errors.As(err, &ec) || ec.code != 1 || !strings.Contains(err.Error(), "insufficient_gpus") {
		t.Fatalf("alloc on a drained pool: %v", err)
	}
	if _, err := runCtl(t, append(base, "free", a.ID)...); err != nil {
		t.Fatal(err)
	}
	out, _ = runCtl(t, append(base, "stats", "--json")...)
	var s pool.Stats
	if json.Unmarshal([]byte(out), &s) != nil || s.Used != 0 || s.Draining != 3 {
		t.Fatalf("stats %q", out)
	}
	out, _ = runCtl(t, append(base, "events", "--host", "h1")...)
	if !strings.Contains(out, "allocated") || !strings.Contains(out, "released") || !strings.Contains(out, a.ID) {
		t.Fatalf("events: %q", out)
	}
	if _, err := runCtl(t, append(base, "alloc", "--host", "h1")...); !errors.As(err, &ec) || ec.code != 2 {
		t.Fatalf("alloc without --count: %v", err)
	}
	if _, err := runCtl(t, "--manager", "not a url", "box"); !errors.As(err, &ec) || ec.code != 2 {
		t.Fatalf("bad --manager: %v", err)
	}
}

func TestCtlHTTPS(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewTLSServer(m.Handler())
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	var ec exitCodeError
	if _, err := runCtl(t, "--manager", srv.URL, "stats"); !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	tok := filepath.Join(t.TempDir(), "token") // reads need a token too
	os.WriteFile(tok, []byte("tok\n"), 0o600)
	out, err := runCtl(t, "--manager", srv.URL, "--ca-file", ca, "--token-file", tok, "stats", "--json")
	if err != nil || !strings.Contains(out, `"gpus": 0`) {
		t.Fatalf("%q %v", out, err)
	}
}
