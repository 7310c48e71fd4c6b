package nettlpcmd

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

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
