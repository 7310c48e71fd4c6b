package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/app/nettlpcmd"
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

func newNettlpServeCmd(e *env) *cobra.Command {
	var fl nettlpcmd.ServeOptions
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
  dxpu nettlp serve --addr 127.0.0.2 --tag-ports 16 --mem-size 64M
  dma_write -r 127.0.0.2 -l 127.0.0.1 -a 0x1000 ...   (libtlp apps)
  dma_read  -r 127.0.0.2 -l 127.0.0.1 -a 0x1000 -s 64 -m 256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl.Log = e.log
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return exitFor(nettlpcmd.Serve(ctx, fl), 2)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.Addr, "addr", "127.0.0.2", "IPv4 address to bind (not 0.0.0.0: replies must leave from the address requests went to)")
	f.IntVar(&fl.Tags, "tag-ports", nettlp.MaxTags, "number of NetTLP tag ports, 0x3000.. (1-16)")
	deprecatedAlias(f, "tags", "tag-ports", func() { f.IntVar(&fl.Tags, "tags", nettlp.MaxTags, "") })
	f.StringVar(&fl.MemSize, "mem-size", "64M", "memory size in bytes (suffixes K, M, G, T: powers of 1024)")
	f.StringVar(&fl.Base, "base", "0", "lowest memory address (0x... for hex; suffixes as --mem-size)")
	bytesVar(f, &fl.MPS, "mps", 256, "Max Payload Size: largest CplD payload (128-4096)")
	bytesVar(f, &fl.RCB, "rcb", 64, "Read Completion Boundary: split points of larger reads (64 or 128)")
	f.StringVar(&fl.Completer, "completer", "00:00.0", "completer ID in completions (bb:dd.f)")
	f.StringVar(&fl.Fill, "fill", "zero", "content of never-written memory: zero, or pattern (each byte the XOR of its address bytes)")
	f.StringVar(&fl.RcvBuf, "rcvbuf", "8M", "receive buffer per socket (posted writes lost to a full buffer are lost silently)")
	f.StringArrayVar(&fl.Allow, "allow", nil, "answer this source prefix, e.g. 192.168.10.0/24 (repeatable; default: loopback only)")
	f.DurationVar(&fl.StatsEvery, "stats-every", 0, "log the counters at this interval (0: only at exit)")
	return cmd
}

// addNettlpClientFlags binds the flags read and write share.
func addNettlpClientFlags(c *cobra.Command, fl *nettlpcmd.ClientOptions) {
	f := c.Flags()
	f.StringVar(&fl.Remote, "remote", "127.0.0.2", "the NetTLP target (libtlp's -r)")
	f.StringVar(&fl.Local, "local", "127.0.0.1", "local address to bind (libtlp's -l)")
	f.IntVar(&fl.Tag, "tag", 0, "tag; the port is 0x3000 + (tag & 0xf)")
	f.StringVar(&fl.Requester, "requester", "00:00.0", "requester ID (bb:dd.f)")
	f.StringVar(&fl.Addr, "addr", "0", "DMA address (0x... for hex)")
	f.DurationVar(&fl.Timeout, "timeout", nettlp.LibtlpTimeout, "wait per completion (libtlp: 500ms)")
}

func newNettlpReadCmd() *cobra.Command {
	var fl nettlpcmd.ReadOptions
	cmd := &cobra.Command{
		Use:   "read",
		Short: "DMA-read from a NetTLP target the way libtlp's dma_read does, and hex-dump the bytes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl.Stdout = cmd.OutOrStdout()
			return exitFor(nettlpcmd.Read(fl), 2)
		},
	}
	addNettlpClientFlags(cmd, &fl.ClientOptions)
	bytesVar(cmd.Flags(), &fl.Size, "size", 4, "bytes to read")
	bytesVar(cmd.Flags(), &fl.MRRS, "mrrs", 0, "split into requests of at most this many bytes, as dma_read_aligned (0: one dma_read)")
	return cmd
}

func newNettlpWriteCmd() *cobra.Command {
	var fl nettlpcmd.WriteOptions
	cmd := &cobra.Command{
		Use:   "write",
		Short: "DMA-write to a NetTLP target the way libtlp's dma_write does (posted: nothing comes back)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl.Stdout = cmd.OutOrStdout()
			return exitFor(nettlpcmd.Write(fl), 2)
		},
	}
	addNettlpClientFlags(cmd, &fl.ClientOptions)
	cmd.Flags().StringVar(&fl.Hex, "hex", "", "data to write, in hex")
	cmd.Flags().StringVar(&fl.String, "string", "", "data to write, as text")
	bytesVar(cmd.Flags(), &fl.MPS, "mps", 0, "split into writes of at most this many bytes, as dma_write_aligned (0: one dma_write)")
	return cmd
}
