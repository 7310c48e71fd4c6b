package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/tlp"
)

func TestNettlpParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{"64M": 64 << 20, "4096": 4096, "0x1000": 0x1000, "1G": 1 << 30, "2k": 2048, "1T": 1 << 40} {
		if got, err := parseSize("x", in); err != nil || got != want {
			t.Errorf("%q: %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "M", "12Q", "-1", "99999999999999999999T"} {
		if _, err := parseSize("x", in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestNettlpServe runs `dxpu nettlp serve` in-process and talks to it as
// libtlp would, then with the client subcommands.
func TestNettlpServe(t *testing.T) {
	t.Parallel()
	// Addresses of this test alone, so no other test running at the same
	// time holds these ports.
	addr, local := netip.MustParseAddr("127.0.3.1"), netip.MustParseAddr("127.0.3.11")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var serveLog syncBuffer
	bound := serveLog.await("nettlp target serving")
	done := make(chan error, 1)
	go func() {
		_, err := execute(ctx, "", &serveLog, "nettlp", "serve", "--addr", addr.String(), "--tags", "4", "--mem-size", "1M", "--base", "0x10000",
			"--fill", "pattern", "--mps", "512", "--rcb", "128", "--completer", "00:00.0", "--rcvbuf", "1M")
		done <- err
	}()
	defer func() { // however the test ends, the target stops
		cancel()
		<-done
	}()
	select {
	case <-bound:
	case err := <-done:
		done <- err
		t.Fatalf("serve stopped before binding: %v\n%s", err, serveLog.String())
	case <-ctx.Done():
		t.Fatalf("serve did not bind within the test's deadline:\n%s", serveLog.String())
	}

	c, err := nettlp.Dial(local, addr, 2, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 20 * time.Second
	got := make([]byte, 8)
	if _, err = c.Read(0x12345, got); err != nil {
		t.Fatalf("read from the served memory: %v", err)
	}
	for i := range got {
		if want := nettlpPattern(0x12345 + uint64(i)); got[i] != want {
			t.Fatalf("byte %d = %#x, pattern says %#x", i, got[i], want)
		}
	}
	data := []byte("written by a libtlp-style client")
	if _, err := c.WriteAligned(0x20003, data, 16); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(data))
	if _, err := c.ReadAligned(0x20003, back, 128); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %q, %v", back, err)
	}
	if _, err := c.Read(0x8000, back[:4]); !errors.Is(err, nettlp.ErrBadCompletion) {
		t.Fatalf("read below --base: %v, want a UR (bad completion to libtlp)", err)
	}

	// The client subcommands against the same target.
	common := []string{"--remote", addr.String(), "--local", local.String(), "--tag", "3", "--requester", "1b:00.0", "--timeout", "20s"}
	if _, _, err := runDxpu(t, "", append([]string{"nettlp", "write", "--addr", "0x30001", "--string", "", "--hex", "c0ffee", "--mps", "0"}, common...)...); err != nil {
		t.Fatalf("nettlp write: %v", err)
	}
	out, _, err := runDxpu(t, "", append([]string{"nettlp", "read", "--addr", "0x30000", "--size", "5", "--mrrs", "0"}, common...)...)
	if err != nil {
		t.Fatalf("nettlp read: %v", err)
	}
	if want := fmt.Sprintf("%02x c0 ff ee %02x", nettlpPattern(0x30000), nettlpPattern(0x30004)); !strings.Contains(out, want) {
		t.Fatalf("nettlp read printed %q, want %q in it", out, want)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	done <- nil
}

// TestNettlpServeBadFlags: each bad flag is a usage error before the
// target serves (under the deadline: a check that regresses fails here).
func TestNettlpServeBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--addr", "0.0.0.0"}, {"--addr", "nope"}, {"--mps", "100"}, {"--rcb", "32"},
		{"--mem-size", "lots"}, {"--fill", "random"}, {"--completer", "zz"}, {"--tags", "17"},
	} {
		full := append([]string{"nettlp", "serve", "--addr", "127.0.3.2", "--tags", "16", "--mem-size", "1M", "--base", "0",
			"--mps", "256", "--rcb", "64", "--fill", "zero", "--completer", "00:00.0", "--rcvbuf", "1M"}, args...)
		_, _, err := runDxpu(t, "", full...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 {
			t.Errorf("%v: %v, want exit code 2", args, err)
		}
	}
}
