package nettlpcmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp"
)

// ServeOptions are `dxpu nettlp serve`'s flags.
type ServeOptions struct {
	Addr          string
	Tags          int
	MemSize, Base string
	MPS, RCB      int
	Completer     string
	Fill          string // zero or pattern
	RcvBuf        string
	StatsEvery    time.Duration
	Allow         []string
	Log           *slog.Logger
	// Ready, if set, is called once the target is bound.
	Ready func()
}

// Pattern is the --fill pattern content of address a: the XOR of its
// bytes.
func Pattern(a uint64) byte {
	return byte(a) ^ byte(a>>8) ^ byte(a>>16) ^ byte(a>>24) ^ byte(a>>32) ^ byte(a>>40) ^ byte(a>>48) ^ byte(a>>56)
}

// Serve checks o, binds the target and serves until ctx ends.
func Serve(ctx context.Context, o ServeOptions) error {
	usage := apperr.Usage
	addr, err := netip.ParseAddr(o.Addr)
	if err != nil {
		return usage(fmt.Errorf("--addr %q: %w", o.Addr, err))
	}
	// 0 tags would mean nettlp's default, 16: the flag's range is 1..16.
	if o.Tags < 1 || o.Tags > nettlp.MaxTags {
		return usage(fmt.Errorf("--tag-ports %d: want 1..%d", o.Tags, nettlp.MaxTags))
	}
	size, err := bytesize.Parse("mem-size", o.MemSize)
	if err != nil {
		return usage(err)
	}
	if size == 0 {
		return usage(fmt.Errorf("--mem-size %s: want above 0 bytes", o.MemSize))
	}
	base, err := parseAddress("base", o.Base)
	if err != nil {
		return usage(err)
	}
	rcvbuf, err := bytesize.Parse("rcvbuf", o.RcvBuf)
	if err != nil {
		return usage(err)
	}
	if rcvbuf > 1<<30 {
		return usage(fmt.Errorf("--rcvbuf %q: want up to 1G", o.RcvBuf))
	}
	if o.StatsEvery < 0 {
		return usage(units.Errorf("--stats-every %v: must not be negative", o.StatsEvery))
	}
	completer, err := tlp.ParseID(o.Completer)
	if err != nil {
		return usage(fmt.Errorf("--completer: %w", err))
	}
	var fill func(uint64) byte
	switch o.Fill {
	case "zero":
	case "pattern":
		fill = Pattern
	default:
		return usage(fmt.Errorf("--fill %q: want zero or pattern", o.Fill))
	}
	mem, err := nettlp.NewSparseMemory(base, size, fill)
	if err != nil {
		return usage(err)
	}
	allow, err := parseAllow(o.Allow)
	if err != nil {
		return usage(err)
	}
	target, err := nettlp.NewTarget(nettlp.TargetConfig{
		Addr: addr, Tags: o.Tags, RecvBuffer: int(rcvbuf), Allow: allow, Logger: o.Log,
		Completer: nettlp.CompleterConfig{MPS: o.MPS, RCB: o.RCB, CompleterID: completer},
	}, mem)
	if err != nil {
		return usage(err)
	}
	tr := target.Transport()
	o.Log.Info("nettlp target serving",
		"addr", addr, "ports", fmt.Sprintf("%#x-%#x", nettlp.Port(0), nettlp.Port(uint16(tr.Tags()-1))),
		"memory", fmt.Sprintf("[%#x, %#x)", base, base+size), "mps", o.MPS, "rcb", o.RCB,
		"completer", completer,
		// The kernel doubles what it is asked for (socket(7)), so both.
		"rcvbuf_bytes", rcvbuf, "kernel_rcvbuf_bytes", tr.RecvBuffer(0), "allow", allowString(allow))
	if o.Ready != nil {
		o.Ready()
	}
	if o.StatsEvery > 0 {
		go func() {
			tick := time.NewTicker(o.StatsEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					logStats(o.Log, "nettlp target", target.Stats().Snapshot(), mem.Pages())
				}
			}
		}()
	}
	err = target.Serve(ctx)
	logStats(o.Log, "nettlp target stopped", target.Stats().Snapshot(), mem.Pages())
	return apperr.Failed(err)
}

// parseAllow reads --allow: prefixes, or addresses standing for
// themselves.
func parseAllow(in []string) ([]netip.Prefix, error) {
	var allow []netip.Prefix
	for _, a := range in {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ip, ierr := netip.ParseAddr(a)
			if ierr != nil {
				return nil, fmt.Errorf("--allow %q: want an address or a prefix such as 192.168.10.0/24", a)
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		allow = append(allow, p)
	}
	return allow, nil
}

func logStats(log *slog.Logger, msg string, s nettlp.StatsSnapshot, pages int) {
	log.Info(msg, "datagrams", s.Datagrams, "reads", s.Reads, "writes", s.Writes,
		"bytes_read", s.BytesRead, "bytes_written", s.BytesWritten, "completions", s.Completions,
		"ur", s.UR, "malformed", s.Malformed, "ignored", s.Ignored, "writes_lost", s.WritesLost,
		"send_errors", s.SendErrors, "pages", pages)
}

func allowString(p []netip.Prefix) string {
	if len(p) == 0 {
		return "loopback"
	}
	return fmt.Sprint(p)
}
