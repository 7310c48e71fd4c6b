package nettlpcmd

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestAddressFlagsAskForAnAddress: finding 20 of the new user's trial.
// --addr (read, write) and --base (serve) are memory addresses: a bad one
// is a usage error that asks for an address, not for a byte count.
func TestAddressFlagsAskForAnAddress(t *testing.T) {
	t.Parallel()
	client := ClientOptions{Remote: "127.0.0.2", Local: "127.0.0.1", Requester: "00:00.0", Addr: "zz", Stdout: io.Discard}
	serve := ServeOptions{Addr: "127.0.3.2", Tags: 16, MemSize: "1M", Base: "zz", MPS: 256, RCB: 64, Fill: "zero",
		Completer: "00:00.0", RcvBuf: "1M", Log: slog.New(slog.DiscardHandler)}
	for name, err := range map[string]error{
		"read --addr":  Read(ReadOptions{ClientOptions: client, Size: 4}),
		"write --addr": Write(WriteOptions{ClientOptions: client, Hex: "c0"}),
		"serve --base": Serve(t.Context(), serve),
	} {
		flag := strings.Fields(name)[1]
		want := flag + ` "zz": want a memory address like 0x1000 or 4096`
		if !errors.Is(err, apperr.ErrUsage) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "byte count") {
			t.Errorf("%s zz: %v; want a usage error starting %q", name, err, want)
		}
	}
}

// TestFailedReadPrintsNoResult (new user's trial): a read that fails
// prints nothing on stdout, where it printed "read 0 of 4 bytes" and a
// dump before the error; the error says how many bytes came.
func TestFailedReadPrintsNoResult(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	// Nothing serves NetTLP on 127.0.3.98: the read is refused or times out.
	// From an address of its own: a tag port on 127.0.0.1 may be bound by
	// a test of another package running beside it.
	o := ReadOptions{ClientOptions: ClientOptions{Remote: "127.0.3.98", Local: "127.0.3.97", Requester: "00:00.0", Addr: "0x1000",
		Timeout: 200 * time.Millisecond, Stdout: &out}, Size: 4}
	err := Read(o)
	if err == nil || errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "read at 0x1000: 0 of 4 bytes came") {
		t.Fatalf("read from nothing: %v; want a failure saying 0 of 4 bytes came", err)
	}
	if out.Len() != 0 {
		t.Errorf("a failed read printed %q on stdout", out.String())
	}
}
