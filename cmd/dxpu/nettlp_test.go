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
// libtlp would.
func TestNettlpServe(t *testing.T) {
	// Addresses of this test alone, so no other test binary running at the
	// same time (go test runs packages in parallel) holds these ports.
	addr, local := netip.MustParseAddr("127.0.3.1"), netip.MustParseAddr("127.0.3.11")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stopped := false
	// However the test ends, the serve command must have returned before
	// the next test uses rootCmd: cobra's command tree is not safe for
	// concurrent use.
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	rootCmd.SetArgs([]string{"nettlp", "serve", "--addr", addr.String(), "--tags", "4", "--mem-size", "1M", "--base", "0x10000",
		"--fill", "pattern", "--mps", "512", "--rcb", "128", "--completer", "00:00.0", "--rcvbuf", "1M"})
	// cobra keeps a subcommand's first context; give this run's explicitly
	// so a repeated run (-count) does not inherit a cancelled one.
	nettlpServeCmd.SetContext(ctx)
	go func() { done <- rootCmd.ExecuteContext(ctx) }()

	c, err := nettlp.Dial(local, addr, 2, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 100 * time.Millisecond
	got := make([]byte, 8)
	for i := 0; i < 500; i++ { // wait until the target has bound its ports
		if _, err = c.Read(0x12345, got); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // refused or timed out: not bound yet
	}
	if err != nil {
		t.Fatalf("read from the served memory: %v", err)
	}
	c.Timeout = 20 * time.Second
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
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	defer rootCmd.SetOut(nil)
	common := []string{"--remote", addr.String(), "--local", local.String(), "--tag", "3", "--requester", "1b:00.0", "--timeout", "20s"}
	rootCmd.SetArgs(append([]string{"nettlp", "write", "--addr", "0x30001", "--string", "", "--hex", "c0ffee", "--mps", "0"}, common...))
	if err := rootCmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("nettlp write: %v", err)
	}
	rootCmd.SetArgs(append([]string{"nettlp", "read", "--addr", "0x30000", "--size", "5", "--mrrs", "0"}, common...))
	if err := rootCmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("nettlp read: %v", err)
	}
	if want := fmt.Sprintf("%02x c0 ff ee %02x", nettlpPattern(0x30000), nettlpPattern(0x30004)); !strings.Contains(out.String(), want) {
		t.Fatalf("nettlp read printed %q, want %q in it", out.String(), want)
	}

	cancel()
	stopped = true
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestNettlpServeBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--addr", "0.0.0.0"}, {"--addr", "nope"}, {"--mps", "100"}, {"--rcb", "32"},
		{"--mem-size", "lots"}, {"--fill", "random"}, {"--completer", "zz"}, {"--tags", "17"},
	} {
		full := append([]string{"nettlp", "serve", "--addr", "127.0.3.2", "--tags", "16", "--mem-size", "1M", "--base", "0",
			"--mps", "256", "--rcb", "64", "--fill", "zero", "--completer", "00:00.0", "--rcvbuf", "1M"}, args...)
		rootCmd.SetArgs(full)
		err := rootCmd.ExecuteContext(context.Background())
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 {
			t.Errorf("%v: %v, want exit code 2", args, err)
		}
	}
}
