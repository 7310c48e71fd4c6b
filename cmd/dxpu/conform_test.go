package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeUDPPort returns a loopback UDP address nobody listens on now.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// TestConformAgainstTheBridgeDaemon: the kit, run as `dxpu conform`, finds
// no rule broken by dxpu's own bridge daemon (`dxpu bridge --pcie memory`).
func TestConformAgainstTheBridgeDaemon(t *testing.T) {
	t.Parallel()
	iut, kit := freeUDPPort(t), freeUDPPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var daemonLog syncBuffer
	daemonErr := make(chan error, 1)
	dctx, stopDaemon := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := execute(dctx, "", &daemonLog, "bridge", "--role", "gpu", "--pair", "5", "--listen", iut, "--peer", kit,
			"--pcie", "memory", "--mem-base", "0x0", "--mem-size", "64K", "--metrics", "", "--insecure-no-keys")
		daemonErr <- err
	}()
	defer func() {
		stopDaemon()
		wg.Wait()
		if err := <-daemonErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("bridge daemon: %v\n%s", err, daemonLog.String())
		}
	}()
	var stderr syncBuffer
	out, err := execute(ctx, "", &stderr, "conform", "--peer", "udp:"+iut, "--local", kit, "--role", "gpu", "--pair", "5",
		"--keepalive", "50ms", "--dead-after", "1s", "--completion-timeout", "250ms", "--slack", "1s", "--json")
	if err != nil {
		t.Fatalf("conform: %v\n%s\n%s", err, out, stderr.String())
	}
	var rep struct {
		Results []struct {
			Rule, Verdict, Reason string
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	pass := 0
	for _, r := range rep.Results {
		if r.Verdict == "fail" {
			t.Errorf("%s failed: %s", r.Rule, r.Reason)
		}
		if r.Verdict == "pass" {
			pass++
		}
	}
	if pass < 30 || !strings.Contains(out, "LNK-2") {
		t.Errorf("only %d rules passed:\n%s", pass, out)
	}
}

// TestConformFlags: bad flags are usage errors before anything is sent.
func TestConformFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"conform", "--role", "gpu"},
		{"conform", "--peer", "udp:127.0.0.1:1", "--role", "switch"},
		{"conform", "--peer", "udp:127.0.0.1:1", "--role", "gpu", "--pair", "0"},
		{"conform", "--peer", "tcp:127.0.0.1:1", "--role", "gpu", "--local", "127.0.0.1:0"},
	} {
		_, _, err := runDxpu(t, "", args...)
		var ec exitCodeError
		if err == nil || (errors.As(err, &ec) && ec.code != 2) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
