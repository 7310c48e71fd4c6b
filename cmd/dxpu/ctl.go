package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/table"
)

// ctlOptions are the flags every ctl subcommand shares.
type ctlOptions struct {
	e         *env
	manager   string
	tokenFile string
	json      bool
	timeout   time.Duration
	caFile    string
	credOut   string
}

// newCtlCmd builds `dxpu ctl` and its subcommands, the manager's client.
func newCtlCmd(e *env) *cobra.Command {
	fl := &ctlOptions{e: e}
	ctlCmd := &cobra.Command{
		Use:   "ctl",
		Short: "Talk to the manager: boxes, hosts, GPUs, allocations",
		Long: `Ctl is the manager's command-line client. It prints tables for people and,
with --json, the API's JSON for programs.

The manager is --manager (or $DXPU_MANAGER, default http://127.0.0.1:7700);
with several managers give them all, separated by commas, and ctl talks to
the leader;
the token for changing calls comes from --token-file (or $DXPU_TOKEN_FILE,
or the token itself in $DXPU_TOKEN).

Exit status: 0 on success, 1 when the manager refused the call (the error's
stable code is printed), 2 for usage errors or when the manager cannot be
reached.`,
	}

	pf := ctlCmd.PersistentFlags()
	pf.StringVar(&fl.manager, "manager", e.getenvOr("DXPU_MANAGER", "http://127.0.0.1:7700"), "manager URL (several: comma-separated)")
	pf.StringVar(&fl.tokenFile, "token-file", e.getenv("DXPU_TOKEN_FILE"), "file holding the bearer token")
	pf.BoolVar(&fl.json, "json", false, "print JSON instead of tables")
	pf.DurationVar(&fl.timeout, "timeout", 60*time.Second, "give up on the manager after this long")
	pf.StringVar(&fl.caFile, "ca-file", e.getenv("DXPU_CA_FILE"), "PEM CA certificate(s) to trust for an https manager")

	boxCmd := &cobra.Command{Use: "box [ID]", Short: "List boxes, or show one with its GPUs", Args: cobra.MaximumNArgs(1), RunE: fl.box}
	boxAdd := &cobra.Command{Use: "add FILE", Short: "Register or replace a box from JSON (- for stdin)", Args: cobra.ExactArgs(1), RunE: fl.boxAdd,
		Long: addHelp("box", reflect.TypeFor[pool.Box](), boxExample)}
	boxAdd.Flags().StringVar(&fl.credOut, "agent-credential-out", "", "write the bridge agent's credential (issued for an agent_url) to this new 0600 file")
	boxRm := &cobra.Command{Use: "rm ID", Short: "Remove a box whose GPUs are all free", Args: cobra.ExactArgs(1), RunE: fl.boxRm}
	boxCmd.AddCommand(boxAdd, boxRm)

	hostCmd := &cobra.Command{Use: "host", Short: "List hosts", Args: cobra.NoArgs, RunE: fl.host}
	hostAdd := &cobra.Command{Use: "add FILE", Short: "Register or replace a host from JSON (- for stdin)", Args: cobra.ExactArgs(1), RunE: fl.hostAdd,
		Long: addHelp("host", reflect.TypeFor[pool.Host](), hostExample)}
	hostAdd.Flags().StringVar(&fl.credOut, "agent-credential-out", "", "write the bridge agent's credential (issued for an agent_url) to this new 0600 file")
	hostRm := &cobra.Command{Use: "rm ID", Short: "Remove a host that holds no GPUs", Args: cobra.ExactArgs(1), RunE: fl.hostRm}
	hostCmd.AddCommand(hostAdd, hostRm)

	gpuCmd := &cobra.Command{Use: "gpu", Short: "List GPUs (--box, --state free|used|unhealthy)", Args: cobra.NoArgs, RunE: fl.gPU}
	gpuCmd.Flags().String("box", "", "only this box")
	gpuCmd.Flags().String("state", "", "only free, used or unhealthy GPUs")
	gpuFail := &cobra.Command{Use: "fail ID", Short: "Mark a GPU unhealthy (its host gets a surprise removal)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return fl.health(cmd, args[0], pool.Unhealthy) }}
	gpuHeal := &cobra.Command{Use: "heal ID", Short: "Mark a GPU healthy again", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return fl.health(cmd, args[0], pool.Healthy) }}
	gpuCmd.AddCommand(gpuFail, gpuHeal)

	allocCmd := &cobra.Command{Use: "alloc --host H --count N", Short: "Lend GPUs to a host", Args: cobra.NoArgs, RunE: fl.alloc}
	af := allocCmd.Flags()
	af.String("host", "", "host that gets the GPUs (required)")
	af.Int("count", 0, "number of GPUs (required)")
	af.String("model", "", "GPU model, e.g. H100")
	af.Uint64("min-memory", 0, "minimum GPU memory in MiB")
	af.Bool("same-box", false, "all GPUs from one box (peer-to-peer)")
	af.Bool("spread", false, "spread GPUs over boxes")
	af.Duration("max-rtt", 0, "maximum RTT between the host and a GPU's box, e.g. 20us")
	af.String("request-id", "", "idempotency key: retrying with it returns the same allocation")
	allocList := &cobra.Command{Use: "list", Short: "List allocations (--host to filter)", Args: cobra.NoArgs, RunE: fl.allocList}
	allocList.Flags().String("host", "", "only this host's allocations")
	allocCmd.AddCommand(allocList)

	freeCmd := &cobra.Command{Use: "free ID...", Short: "Release allocations", Args: cobra.MinimumNArgs(1), RunE: fl.free}
	rekeyCmd := &cobra.Command{Use: "rekey ID...", Short: "Give every pair of allocations a fresh key (a lossless key change on both bridges)", Args: cobra.MinimumNArgs(1), RunE: fl.rekey}
	drainCmd := &cobra.Command{Use: "drain BOX", Short: "Stop new allocations on a box and list the ones still there", Args: cobra.ExactArgs(1), RunE: fl.drain}
	drainCmd.Flags().Bool("off", false, "resume allocations on the box")
	rttCmd := &cobra.Command{Use: "rtt", Short: "List measured RTTs, or record one with --host --box --rtt", Args: cobra.NoArgs, RunE: fl.rTT}
	rttCmd.Flags().String("host", "", "host")
	rttCmd.Flags().String("box", "", "box")
	rttCmd.Flags().Duration("rtt", 0, "measured round-trip time")
	statsCmd := &cobra.Command{Use: "stats", Short: "Count GPUs by state", Args: cobra.NoArgs, RunE: fl.stats}
	tableCmd := &cobra.Command{Use: "table", Short: "Print the switch forwarding table (--watch: every change)", Args: cobra.NoArgs, RunE: fl.table}
	tableCmd.Flags().Bool("watch", false, "keep printing the table at every change (until interrupted)")

	eventsCmd := &cobra.Command{Use: "events", Short: "Print pool events (--host to filter, --watch to follow)", Args: cobra.NoArgs, RunE: fl.events}
	eventsCmd.Flags().String("host", "", "only this host's events")
	eventsCmd.Flags().Bool("watch", false, "keep printing new events (until interrupted)")

	ctlCmd.AddCommand(boxCmd, hostCmd, gpuCmd, allocCmd, freeCmd, rekeyCmd, drainCmd, rttCmd, statsCmd, tableCmd, eventsCmd)
	return ctlCmd
}

func (fl *ctlOptions) client(cmd *cobra.Command) (*ctlclient.Client, context.Context, context.CancelFunc, error) {
	for _, m := range strings.Split(fl.manager, ",") {
		u, err := url.Parse(strings.TrimSpace(m))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, nil, exitCodeError{2, fmt.Errorf("--manager %q: want a URL such as http://127.0.0.1:7700, or several separated by commas", m)}
		}
	}
	var err error
	tok := fl.e.getenv("DXPU_TOKEN")
	if fl.tokenFile != "" {
		if tok, err = manager.LoadTokenFile(fl.tokenFile); err != nil {
			return nil, nil, nil, exitCodeError{2, err}
		}
	}
	c := ctlclient.New(fl.manager, tok)
	if fl.caFile != "" {
		pem, err := os.ReadFile(fl.caFile)
		if err != nil {
			return nil, nil, nil, exitCodeError{2, err}
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, nil, nil, exitCodeError{2, fmt.Errorf("--ca-file %s: no PEM certificate in it", fl.caFile)}
		}
		c.HTTP.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), fl.timeout)
	return c, ctx, cancel, nil
}

// ctlErr gives manager refusals exit status 1 and everything else 2.
func ctlErr(err error) error {
	if err == nil {
		return nil
	}
	var ae *ctlclient.APIError
	if errors.As(err, &ae) {
		return exitCodeError{1, err}
	}
	return exitCodeError{2, err}
}

// call runs f with a client and prints its result as JSON or with table.
func call[T any](fl *ctlOptions, cmd *cobra.Command, f func(ctx context.Context, c *ctlclient.Client) (T, error), table func(w io.Writer, v T)) error {
	c, ctx, cancel, err := fl.client(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	v, err := f(ctx, c)
	if err != nil {
		return ctlErr(err)
	}
	if fl.json {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	table(tw, v)
	return tw.Flush()
}

func readJSONArg[T any](stdin io.Reader, path string) (T, error) {
	var v T
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return v, exitCodeError{2, err}
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, exitCodeError{2, fmt.Errorf("%s: %w", path, withValidFields(err, reflect.TypeFor[T]()))}
	}
	return v, nil
}

func where(l pool.Location) string {
	if l.Pod == "" && l.Rack == "" {
		return "-"
	}
	return l.Pod + "/" + l.Rack
}

func boxTable(w io.Writer, bs []pool.Box) {
	fmt.Fprintln(w, "BOX\tLOCATION\tBRIDGE\tGPUS\tFREE\tUSED\tUNHEALTHY\tSTATE")
	for _, b := range bs {
		free, used, bad := 0, 0, 0
		for _, g := range b.GPUs {
			switch {
			case g.Allocation != "":
				used++
			case g.Health != pool.Healthy:
				bad++
			default:
				free++
			}
		}
		state := "active"
		if b.Draining {
			state = "draining"
		}
		fmt.Fprintf(w, "%s\t%s\t%s %s\t%d\t%d\t%d\t%d\t%s\n", b.ID, where(b.Location), b.Bridge.SwitchPort, b.Bridge.MAC, len(b.GPUs), free, used, bad, state)
	}
}

func gpuTable(w io.Writer, gs []pool.GPU) {
	fmt.Fprintln(w, "GPU\tBOX\tMODEL\tMEMORY\tBDF\tSWITCH/PORT\tHEALTH\tALLOCATION")
	for _, g := range gs {
		a := g.Allocation
		if a == "" {
			a = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d MiB\t%s\t%d/%d\t%s\t%s\n", g.ID, g.Box, g.Model, g.MemoryMiB, g.BDF, g.Switch, g.Port, g.Health, a)
	}
}

func allocTable(w io.Writer, as []pool.Allocation) {
	fmt.Fprintln(w, "ALLOCATION\tHOST\tSTATE\tGPUS\tPAIRS\tLOST")
	for _, a := range as {
		var gpus, pairs []string
		for _, g := range a.GPUs {
			gpus = append(gpus, g.GPU)
			pairs = append(pairs, fmt.Sprint(g.Pair))
		}
		lost := "-"
		if len(a.Lost) > 0 {
			lost = strings.Join(a.Lost, ",")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Host, a.State, strings.Join(gpus, ","), strings.Join(pairs, ","), lost)
	}
}

func (fl *ctlOptions) box(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Box, error) { return c.Box(ctx, args[0]) },
			func(w io.Writer, b pool.Box) {
				boxTable(w, []pool.Box{b})
				fmt.Fprintln(w)
				gpuTable(w, b.GPUs)
			})
	}
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.Box, error) { return c.Boxes(ctx) }, boxTable)
}

func (fl *ctlOptions) boxAdd(cmd *cobra.Command, args []string) error {
	b, err := readJSONArg[pool.Box](cmd.InOrStdin(), args[0])
	if err != nil {
		return err
	}
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Box, error) {
		out, cred, err := c.RegisterBoxAgent(ctx, b)
		if err == nil {
			err = fl.writeCredential(cred)
		}
		return out, err
	}, func(w io.Writer, b pool.Box) { boxTable(w, []pool.Box{b}) })
}

func (fl *ctlOptions) boxRm(cmd *cobra.Command, args []string) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Box, error) { return c.RemoveBox(ctx, args[0]) },
		func(w io.Writer, b pool.Box) { fmt.Fprintf(w, "removed box %s (%d GPUs)\n", b.ID, len(b.GPUs)) })
}

func hostTable(w io.Writer, hs []pool.Host) {
	fmt.Fprintln(w, "HOST\tLOCATION\tBRIDGE\tPORTS\tUSED")
	for _, h := range hs {
		fmt.Fprintf(w, "%s\t%s\t%s %s\t%d\t%d\n", h.ID, where(h.Location), h.Bridge.SwitchPort, h.Bridge.MAC, h.Ports, h.UsedPorts)
	}
}

func (fl *ctlOptions) host(cmd *cobra.Command, args []string) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.Host, error) { return c.Hosts(ctx) }, hostTable)
}

func (fl *ctlOptions) hostAdd(cmd *cobra.Command, args []string) error {
	h, err := readJSONArg[pool.Host](cmd.InOrStdin(), args[0])
	if err != nil {
		return err
	}
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Host, error) {
		out, cred, err := c.RegisterHostAgent(ctx, h)
		if err == nil {
			err = fl.writeCredential(cred)
		}
		return out, err
	}, func(w io.Writer, h pool.Host) { hostTable(w, []pool.Host{h}) })
}

// writeCredential keeps the agent credential the manager issued where
// --agent-credential-out says (a new file, mode 0600); without the flag
// it is dropped: the manager hands the same one again on re-registration.
func (fl *ctlOptions) writeCredential(cred string) error {
	if fl.credOut == "" {
		return nil
	}
	if cred == "" {
		return exitCodeError{1, errors.New("--agent-credential-out: the manager issued no credential (no agent_url in the registration)")}
	}
	f, err := os.OpenFile(fl.credOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return exitCodeError{2, fmt.Errorf("--agent-credential-out: %w", err)}
	}
	if _, err := fmt.Fprintln(f, cred); err != nil {
		f.Close()
		return exitCodeError{2, fmt.Errorf("--agent-credential-out: %w", err)}
	}
	return f.Close()
}

func (fl *ctlOptions) hostRm(cmd *cobra.Command, args []string) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Host, error) { return c.RemoveHost(ctx, args[0]) },
		func(w io.Writer, h pool.Host) { fmt.Fprintf(w, "removed host %s\n", h.ID) })
}

func (fl *ctlOptions) gPU(cmd *cobra.Command, args []string) error {
	box, _ := cmd.Flags().GetString("box")
	state, _ := cmd.Flags().GetString("state")
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.GPU, error) { return c.GPUs(ctx, box, state) }, gpuTable)
}

func (fl *ctlOptions) health(cmd *cobra.Command, gpu string, h pool.Health) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.HealthChange, error) {
		return c.SetGPUHealth(ctx, gpu, h)
	},
		func(w io.Writer, ch pool.HealthChange) {
			fmt.Fprintf(w, "gpu %s is %s\n", ch.GPU.ID, ch.GPU.Health)
			if ch.Alloc != nil && ch.Lost != nil {
				fmt.Fprintf(w, "allocation %s (host %s) lost it: pair %d on host port %d removed; %d GPUs remain\n",
					ch.Alloc.ID, ch.Alloc.Host, ch.Lost.Pair, ch.Lost.HostPort, len(ch.Alloc.GPUs))
			}
		})
}

func (fl *ctlOptions) alloc(cmd *cobra.Command, args []string) error {
	f := cmd.Flags()
	var req pool.Request
	req.Host, _ = f.GetString("host")
	req.Count, _ = f.GetInt("count")
	req.Model, _ = f.GetString("model")
	req.MinMemoryMiB, _ = f.GetUint64("min-memory")
	req.SameBox, _ = f.GetBool("same-box")
	req.Spread, _ = f.GetBool("spread")
	rtt, _ := f.GetDuration("max-rtt")
	req.MaxRTT = pool.Duration(rtt)
	req.RequestID, _ = f.GetString("request-id")
	if req.Host == "" || req.Count <= 0 {
		return exitCodeError{2, errors.New("alloc needs --host and --count (at least 1); 'ctl alloc list' lists allocations")}
	}
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Allocation, error) { return c.Allocate(ctx, req) },
		func(w io.Writer, a pool.Allocation) {
			fmt.Fprintln(w, "GPU\tBOX\tPAIR\tHOST PORT")
			for _, g := range a.GPUs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", g.GPU, g.Box, g.Pair, g.HostPort)
			}
			fmt.Fprintf(w, "allocation %s: %d GPUs for host %s\n", a.ID, len(a.GPUs), a.Host)
		})
}

func (fl *ctlOptions) allocList(cmd *cobra.Command, args []string) error {
	host, _ := cmd.Flags().GetString("host")
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.Allocation, error) {
		return c.Allocations(ctx, host)
	}, allocTable)
}

func (fl *ctlOptions) free(cmd *cobra.Command, args []string) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.Allocation, error) {
		var out []pool.Allocation
		for _, id := range args {
			a, err := c.Free(ctx, id)
			if err != nil {
				return out, fmt.Errorf("free %s: %w", id, err)
			}
			out = append(out, a)
		}
		return out, nil
	}, func(w io.Writer, as []pool.Allocation) {
		for _, a := range as {
			fmt.Fprintf(w, "freed %s: %d GPUs back from host %s\n", a.ID, len(a.GPUs), a.Host)
		}
	})
}

func (fl *ctlOptions) rekey(cmd *cobra.Command, args []string) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.Allocation, error) {
		var out []pool.Allocation
		for _, id := range args {
			a, err := c.Rekey(ctx, id)
			if err != nil {
				return out, fmt.Errorf("rekey %s: %w", id, err)
			}
			out = append(out, a)
		}
		return out, nil
	}, func(w io.Writer, as []pool.Allocation) {
		for _, a := range as {
			fmt.Fprintf(w, "rekeyed %s: %d pairs of host %s have a new key\n", a.ID, len(a.GPUs), a.Host)
		}
	})
}

func (fl *ctlOptions) drain(cmd *cobra.Command, args []string) error {
	off, _ := cmd.Flags().GetBool("off")
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (ctlclient.DrainResult, error) {
		return c.Drain(ctx, args[0], !off)
	},
		func(w io.Writer, r ctlclient.DrainResult) {
			boxTable(w, []pool.Box{r.Box})
			if len(r.Allocations) > 0 {
				fmt.Fprintf(w, "\nallocations still on %s: %s\n", r.Box.ID, strings.Join(r.Allocations, " "))
			}
		})
}

func (fl *ctlOptions) rTT(cmd *cobra.Command, args []string) error {
	f := cmd.Flags()
	host, _ := f.GetString("host")
	box, _ := f.GetString("box")
	rtt, _ := f.GetDuration("rtt")
	if host != "" || box != "" || rtt != 0 {
		if host == "" || box == "" || rtt <= 0 {
			return exitCodeError{2, errors.New("recording an RTT needs --host, --box and a positive --rtt")}
		}
		r := pool.RTT{Host: host, Box: box, RTT: pool.Duration(rtt)}
		return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.RTT, error) { return r, c.SetRTT(ctx, r) },
			func(w io.Writer, r pool.RTT) { fmt.Fprintf(w, "rtt %s <-> %s = %v\n", r.Host, r.Box, r.RTT) })
	}
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) ([]pool.RTT, error) { return c.RTTs(ctx) },
		func(w io.Writer, rs []pool.RTT) {
			fmt.Fprintln(w, "HOST\tBOX\tRTT")
			for _, r := range rs {
				fmt.Fprintf(w, "%s\t%s\t%v\n", r.Host, r.Box, r.RTT)
			}
		})
}

func (fl *ctlOptions) stats(cmd *cobra.Command, args []string) error {
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (pool.Stats, error) { return c.Stats(ctx) },
		func(w io.Writer, s pool.Stats) {
			fmt.Fprintln(w, "GPUS\tFREE\tUSED\tUNHEALTHY\tDRAINING\tBOXES\tHOSTS\tALLOCATIONS")
			fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.GPUs, s.Free, s.Used, s.Unhealthy, s.Draining, s.Boxes, s.Hosts, s.Allocs)
		})
}

func (fl *ctlOptions) table(cmd *cobra.Command, args []string) error {
	if watch, _ := cmd.Flags().GetBool("watch"); watch {
		return fl.tableWatch(cmd)
	}
	return call(fl, cmd, func(ctx context.Context, c *ctlclient.Client) (table.Table, error) { return c.Table(ctx) }, printTable)
}

// ctlTableWatch follows the table as a switch does: long-polls with the
// version it has and prints every new version.
func (fl *ctlOptions) tableWatch(cmd *cobra.Command) error {
	c, _, cancel, err := fl.client(cmd)
	if err != nil {
		return err
	}
	cancel() // the watch runs until interrupted, not for --timeout
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var version uint64
	for first := true; ctx.Err() == nil; first = false {
		t, err := c.WatchTable(ctx, version, 30*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return ctlErr(err)
		}
		if !first && t.Version == version {
			continue
		}
		version = t.Version
		if fl.json {
			json.NewEncoder(cmd.OutOrStdout()).Encode(t)
			continue
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		printTable(tw, t)
		fmt.Fprintln(tw)
		tw.Flush()
	}
	return nil
}

func printTable(w io.Writer, t table.Table) {
	fmt.Fprintf(w, "version %d, %d pairs\n", t.Version, len(t.Pairs))
	fmt.Fprintln(w, "PAIR\tHOST PORT\tHOST MAC\tHOST IP\tGPU PORT\tGPU MAC\tGPU IP")
	for _, p := range t.Pairs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\t%s\t%v\n", p.ID, p.Host.Port, p.Host.MAC, p.Host.IP, p.GPU.Port, p.GPU.MAC, p.GPU.IP)
	}
}

func printEvent(w io.Writer, e ctlclient.Event) {
	var parts []string
	for _, kv := range [][2]string{{"allocation", e.Allocation}, {"host", e.Host}, {"box", e.Box}, {"gpus", strings.Join(e.GPUs, ",")}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if e.Pair != 0 {
		parts = append(parts, fmt.Sprintf("pair=%d", e.Pair))
	}
	if e.HostPort != nil {
		parts = append(parts, fmt.Sprintf("host_port=%d", *e.HostPort))
	}
	fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", e.Time.Format(time.RFC3339Nano), e.Seq, e.Type, strings.Join(parts, " "))
}

func (fl *ctlOptions) events(cmd *cobra.Command, args []string) error {
	host, _ := cmd.Flags().GetString("host")
	watch, _ := cmd.Flags().GetBool("watch")
	c, ctx, cancel, err := fl.client(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	if watch {
		cancel()
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	out := cmd.OutOrStdout()
	var since uint64
	for {
		wait := time.Duration(0)
		if watch {
			wait = 30 * time.Second
		}
		evs, next, err := c.Events(ctx, since, host, wait)
		if err != nil {
			if watch && ctx.Err() != nil {
				return nil
			}
			return ctlErr(err)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, e := range evs {
			if fl.json {
				json.NewEncoder(out).Encode(e)
			} else {
				printEvent(tw, e)
			}
		}
		tw.Flush()
		since = next
		if !watch {
			return nil
		}
	}
}
