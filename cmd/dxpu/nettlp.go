package main

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/tlp"
	"github.com/spf13/cobra"
)

// newNettlpCmd builds `dxpu nettlp serve|read|write`.
func newNettlpCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nettlp",
		Short: "Interoperate with NetTLP: serve emulated host memory to libtlp and NetTLP devices",
	}
	cmd.AddCommand(newNettlpServeCmd(e), newNettlpReadCmd(), newNettlpWriteCmd())
	return cmd
}

// nettlpServeOptions are `dxpu nettlp serve`'s flags.
type nettlpServeOptions struct {
	addr      string
	tags      int
	memSize   string
	base      string
	mps, rcb  int
	completer string
	fill      string
	rcvbuf    string
	every     time.Duration
	allow     []string
}

func newNettlpServeCmd(e *env) *cobra.Command {
	var fl nettlpServeOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a NetTLP-compatible DMA target over an emulated host memory",
		Long: `serve stands where a NetTLP adapter stands: it binds UDP ports 0x3000+tag
(tags 0..N-1) on --addr and answers the DMA reads (MRd, with CplDs) and
writes (MWr) that NetTLP's libtlp tools or a device behind a NetTLP adapter
send, out of a sparse memory of --mem-size bytes from --base.

Completions follow the rules a real root complex uses (at most --mps bytes,
split on --rcb boundaries, completer ID --completer), with libtlp's limits
kept: a read that fits in MPS gets one CplD. libtlp cannot reassemble an
unaligned read split in several CplDs, so with the default MPS 256 keep
unaligned libtlp reads to MRRS 128 (--mps 2048 or 4096 lifts that).
Addresses outside the memory are answered with UR. Only sources in --allow
are answered (default: loopback only); datagrams from anyone else are
dropped unread and counted, so the target cannot be used as a reflection
amplifier. Stop with Ctrl-C.

Example, libtlp on the same machine:
  dxpu nettlp serve --addr 127.0.0.2 --tags 16 --mem-size 64M
  dma_write -r 127.0.0.2 -l 127.0.0.1 -a 0x1000 ...   (libtlp apps)
  dma_read  -r 127.0.0.2 -l 127.0.0.1 -a 0x1000 -s 64 -m 256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNettlpServe(cmd, e, &fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.addr, "addr", "127.0.0.2", "IPv4 address to bind (not 0.0.0.0: replies must leave from the address requests went to)")
	f.IntVar(&fl.tags, "tag-ports", nettlp.MaxTags, "number of NetTLP tag ports, 0x3000.. (1-16)")
	deprecatedAlias(f, "tags", "tag-ports", func() { f.IntVar(&fl.tags, "tags", nettlp.MaxTags, "") })
	f.StringVar(&fl.memSize, "mem-size", "64M", "memory size in bytes (suffixes K, M, G, T: powers of 1024)")
	f.StringVar(&fl.base, "base", "0", "lowest memory address (0x... for hex; suffixes as --mem-size)")
	f.IntVar(&fl.mps, "mps", 256, "Max Payload Size: largest CplD payload (128-4096)")
	f.IntVar(&fl.rcb, "rcb", 64, "Read Completion Boundary: split points of larger reads (64 or 128)")
	f.StringVar(&fl.completer, "completer", "00:00.0", "completer ID in completions (bb:dd.f)")
	f.StringVar(&fl.fill, "fill", "zero", "content of never-written memory: zero, or pattern (each byte the XOR of its address bytes)")
	f.StringVar(&fl.rcvbuf, "rcvbuf", "8M", "receive buffer per socket (posted writes lost to a full buffer are lost silently)")
	f.StringArrayVar(&fl.allow, "allow", nil, "answer this source prefix, e.g. 192.168.10.0/24 (repeatable; default: loopback only)")
	f.DurationVar(&fl.every, "stats-every", 0, "log the counters at this interval (0: only at exit)")
	return cmd
}

// nettlpClientOptions are the flags of `dxpu nettlp read` and `write`.
type nettlpClientOptions struct {
	remote, local, requester, addr string
	tag, size, split               int
	timeout                        time.Duration
	hexData, strData               string
}

func (fl *nettlpClientOptions) addFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&fl.remote, "remote", "127.0.0.2", "the NetTLP target (libtlp's -r)")
	f.StringVar(&fl.local, "local", "127.0.0.1", "local address to bind (libtlp's -l)")
	f.IntVar(&fl.tag, "tag", 0, "tag; the port is 0x3000 + (tag & 0xf)")
	f.StringVar(&fl.requester, "requester", "00:00.0", "requester ID (bb:dd.f)")
	f.StringVar(&fl.addr, "addr", "0", "DMA address (0x... for hex)")
	f.DurationVar(&fl.timeout, "timeout", nettlp.LibtlpTimeout, "wait per completion (libtlp: 500ms)")
}

func newNettlpReadCmd() *cobra.Command {
	var fl nettlpClientOptions
	cmd := &cobra.Command{
		Use:   "read",
		Short: "DMA-read from a NetTLP target the way libtlp's dma_read does, and hex-dump the bytes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, addr, err := fl.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			if fl.size < 1 || fl.size > 1<<20 {
				return exitCodeError{2, fmt.Errorf("--size %d: want 1..1048576", fl.size)}
			}
			buf := make([]byte, fl.size)
			var n int
			if fl.split > 0 {
				n, err = c.ReadAligned(addr, buf, fl.split)
			} else {
				n, err = c.Read(addr, buf)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "read %d of %d bytes at %#x\n", n, fl.size, addr)
			fmt.Fprint(cmd.OutOrStdout(), hex.Dump(buf[:n]))
			if err != nil {
				return exitCodeError{1, err}
			}
			return nil
		},
	}
	fl.addFlags(cmd)
	cmd.Flags().IntVar(&fl.size, "size", 4, "bytes to read")
	cmd.Flags().IntVar(&fl.split, "mrrs", 0, "split into requests of at most this many bytes, as dma_read_aligned (0: one dma_read)")
	return cmd
}

func newNettlpWriteCmd() *cobra.Command {
	var fl nettlpClientOptions
	cmd := &cobra.Command{
		Use:   "write",
		Short: "DMA-write to a NetTLP target the way libtlp's dma_write does (posted: nothing comes back)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data := []byte(fl.strData)
			if fl.hexData != "" {
				if fl.strData != "" {
					return exitCodeError{2, fmt.Errorf("give --hex or --string, not both")}
				}
				var err error
				if data, err = hex.DecodeString(strings.ReplaceAll(fl.hexData, " ", "")); err != nil {
					return exitCodeError{2, fmt.Errorf("--hex: %w", err)}
				}
			}
			if len(data) == 0 || len(data) > 1<<20 {
				return exitCodeError{2, fmt.Errorf("%d bytes to write: want 1..1048576 (--hex or --string)", len(data))}
			}
			c, addr, err := fl.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			var n int
			if fl.split > 0 {
				n, err = c.WriteAligned(addr, data, fl.split)
			} else if len(data) > 4096 {
				return exitCodeError{2, fmt.Errorf("%d bytes in one dma_write: at most 4096 (use --mps)", len(data))}
			} else {
				n, err = c.Write(addr, data)
			}
			if err != nil {
				return exitCodeError{1, err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d bytes at %#x\n", n, addr)
			return nil
		},
	}
	fl.addFlags(cmd)
	cmd.Flags().StringVar(&fl.hexData, "hex", "", "data to write, in hex")
	cmd.Flags().StringVar(&fl.strData, "string", "", "data to write, as text")
	cmd.Flags().IntVar(&fl.split, "mps", 0, "split into writes of at most this many bytes, as dma_write_aligned (0: one dma_write)")
	return cmd
}

// dial opens a libtlp-like client with the flags.
func (fl *nettlpClientOptions) dial() (*nettlp.Client, uint64, error) {
	remote, err := netip.ParseAddr(fl.remote)
	if err != nil {
		return nil, 0, exitCodeError{2, fmt.Errorf("--remote %q: %w", fl.remote, err)}
	}
	local, err := netip.ParseAddr(fl.local)
	if err != nil {
		return nil, 0, exitCodeError{2, fmt.Errorf("--local %q: %w", fl.local, err)}
	}
	req, err := tlp.ParseID(fl.requester)
	if err != nil {
		return nil, 0, exitCodeError{2, fmt.Errorf("--requester: %w", err)}
	}
	if fl.tag < 0 || fl.tag > 255 {
		return nil, 0, exitCodeError{2, fmt.Errorf("--tag %d: want 0..255", fl.tag)}
	}
	addr, err := parseSize("addr", fl.addr)
	if err != nil {
		return nil, 0, exitCodeError{2, err}
	}
	c, err := nettlp.Dial(local, remote, uint8(fl.tag), req)
	if err != nil {
		return nil, 0, exitCodeError{2, err}
	}
	c.Timeout = fl.timeout
	return c, addr, nil
}

// nettlpPattern is the --fill pattern content of address a.
func nettlpPattern(a uint64) byte {
	return byte(a) ^ byte(a>>8) ^ byte(a>>16) ^ byte(a>>24) ^ byte(a>>32) ^ byte(a>>40) ^ byte(a>>48) ^ byte(a>>56)
}

func runNettlpServe(cmd *cobra.Command, e *env, fl *nettlpServeOptions) error {
	usage := func(err error) error { return exitCodeError{2, err} }
	addr, err := netip.ParseAddr(fl.addr)
	if err != nil {
		return usage(fmt.Errorf("--addr %q: %w", fl.addr, err))
	}
	size, err := parseSize("mem-size", fl.memSize)
	if err != nil {
		return usage(err)
	}
	base, err := parseSize("base", fl.base)
	if err != nil {
		return usage(err)
	}
	rcvbuf, err := parseSize("rcvbuf", fl.rcvbuf)
	if err != nil || rcvbuf > 1<<30 {
		return usage(fmt.Errorf("--rcvbuf %q: want up to 1G", fl.rcvbuf))
	}
	completer, err := tlp.ParseID(fl.completer)
	if err != nil {
		return usage(fmt.Errorf("--completer: %w", err))
	}
	var fill func(uint64) byte
	switch fl.fill {
	case "zero":
	case "pattern":
		fill = nettlpPattern
	default:
		return usage(fmt.Errorf("--fill %q: want zero or pattern", fl.fill))
	}
	mem, err := nettlp.NewSparseMemory(base, size, fill)
	if err != nil {
		return usage(err)
	}
	var allow []netip.Prefix
	for _, a := range fl.allow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ip, ierr := netip.ParseAddr(a)
			if ierr != nil {
				return usage(fmt.Errorf("--allow %q: want an address or a prefix such as 192.168.10.0/24", a))
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		allow = append(allow, p)
	}
	target, err := nettlp.NewTarget(nettlp.TargetConfig{
		Addr: addr, Tags: fl.tags, RecvBuffer: int(rcvbuf), Allow: allow, Logger: e.log,
		Completer: nettlp.CompleterConfig{MPS: fl.mps, RCB: fl.rcb, CompleterID: completer},
	}, mem)
	if err != nil {
		return usage(err)
	}
	tr := target.Transport()
	e.log.Info("nettlp target serving",
		"addr", addr, "ports", fmt.Sprintf("%#x-%#x", nettlp.Port(0), nettlp.Port(uint16(tr.Tags()-1))),
		"memory", fmt.Sprintf("[%#x, %#x)", base, base+size), "mps", fl.mps, "rcb", fl.rcb,
		"completer", completer, "rcvbuf", tr.RecvBuffer(0), "allow", allowString(allow))

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if fl.every > 0 {
		go func() {
			tick := time.NewTicker(fl.every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					nettlpLogStats(e.log, "nettlp target", target.Stats().Snapshot(), mem.Pages())
				}
			}
		}()
	}
	err = target.Serve(ctx)
	nettlpLogStats(e.log, "nettlp target stopped", target.Stats().Snapshot(), mem.Pages())
	if err != nil {
		return exitCodeError{1, err}
	}
	return nil
}

func nettlpLogStats(log *slog.Logger, msg string, s nettlp.StatsSnapshot, pages int) {
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
