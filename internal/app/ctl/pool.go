package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/internal/app/units"
)

// Box prints one box with its GPUs, or every box when id is empty.
func Box(ctx context.Context, o Options, id string) error {
	if id != "" {
		return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Box, error) { return c.Box(ctx, id) },
			func(w io.Writer, b pool.Box) {
				boxTable(w, []pool.Box{b})
				fmt.Fprintln(w)
				gpuTable(w, b.GPUs)
			})
	}
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) ([]pool.Box, error) { return c.Boxes(ctx) }, boxTable)
}

// AddBox registers the box in the JSON file path ("-": o.Stdin).
func AddBox(ctx context.Context, o Options, path string) error {
	// Sent as written: the manager's strict decoding refuses what the
	// local one takes (a key twice, a key in another case), and a
	// re-encoding would hide it.
	b, data, err := jsonfile.ReadData[pool.Box](o.Stdin, path)
	if err != nil {
		return err
	}
	if err := credentialNeedsAgent(o.CredentialOut, b.AgentURL, "box"); err != nil {
		return err
	}
	co, err := createCredential(o.CredentialOut)
	if err != nil {
		return err
	}
	defer co.abandon()
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Box, error) {
		out, cred, err := c.RegisterBoxJSON(ctx, data)
		if err == nil {
			err = co.write(cred)
		}
		return out, err
	}, func(w io.Writer, b pool.Box) { boxTable(w, []pool.Box{b}) })
}

// RemoveBox removes a box whose GPUs are all free.
func RemoveBox(ctx context.Context, o Options, id string) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Box, error) { return c.RemoveBox(ctx, id) },
		func(w io.Writer, b pool.Box) {
			fmt.Fprintf(w, "removed box %s (%s)\n", b.ID, count(len(b.GPUs), "GPU"))
		})
}

// Hosts prints every host.
func Hosts(ctx context.Context, o Options) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) ([]pool.Host, error) { return c.Hosts(ctx) }, hostTable)
}

// AddHost registers the host in the JSON file path ("-": o.Stdin).
func AddHost(ctx context.Context, o Options, path string) error {
	// Sent as written: the manager's strict decoding refuses what the
	// local one takes (a key twice, a key in another case), and a
	// re-encoding would hide it.
	h, data, err := jsonfile.ReadData[pool.Host](o.Stdin, path)
	if err != nil {
		return err
	}
	if err := credentialNeedsAgent(o.CredentialOut, h.AgentURL, "host"); err != nil {
		return err
	}
	co, err := createCredential(o.CredentialOut)
	if err != nil {
		return err
	}
	defer co.abandon()
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Host, error) {
		out, cred, err := c.RegisterHostJSON(ctx, data)
		if err == nil {
			err = co.write(cred)
		}
		return out, err
	}, func(w io.Writer, h pool.Host) { hostTable(w, []pool.Host{h}) })
}

// credentialOut is --agent-credential-out: the new file (mode 0600) that
// gets the agent credential the manager issues. It is created before the
// manager is asked, so that a path that cannot be written fails the
// command before anything is registered; without a path the credential is
// dropped (the manager hands the same one again on re-registration).
type credentialOut struct {
	f    *os.File // nil: no --agent-credential-out
	path string
	done bool
}

// credentialNeedsAgent refuses --agent-credential-out for a registration
// without an agent_url before it is sent: the manager issues a credential
// only to an agent it reaches, and the registration would be made with
// the command failing after it.
func credentialNeedsAgent(path, agentURL, kind string) error {
	if path != "" && agentURL == "" {
		return apperr.Usage(fmt.Errorf("--agent-credential-out: the %s has no agent_url: the manager issues a credential only to an agent it reaches", kind))
	}
	return nil
}

func createCredential(path string) (*credentialOut, error) {
	if path == "" {
		return &credentialOut{}, nil
	}
	f, err := secretfile.Create("--agent-credential-out", path) // O_EXCL: never through a link
	if err != nil {
		return nil, apperr.Usage(err)
	}
	return &credentialOut{f: f, path: path}, nil
}

// write keeps cred in the file and closes it.
func (c *credentialOut) write(cred string) error {
	if c.f == nil {
		return nil
	}
	if cred == "" {
		return apperr.Failed(errors.New("--agent-credential-out: the manager issued no credential (no agent_url in the registration)"))
	}
	_, err := fmt.Fprintln(c.f, cred)
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return apperr.Usage(fmt.Errorf("--agent-credential-out %s: %w", oneline.Name(c.path), err))
	}
	c.done = true
	return nil
}

// abandon removes the file created for a credential that was never
// written (the manager refused, or was not reached), if it is still the
// file created.
func (c *credentialOut) abandon() {
	if c.f == nil || c.done {
		return
	}
	st, err := c.f.Stat()
	c.f.Close()
	if now, lerr := os.Lstat(c.path); err == nil && lerr == nil && os.SameFile(st, now) {
		os.Remove(c.path)
	}
}

// RemoveHost removes a host that holds no GPUs.
func RemoveHost(ctx context.Context, o Options, id string) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Host, error) { return c.RemoveHost(ctx, id) },
		func(w io.Writer, h pool.Host) { fmt.Fprintf(w, "removed host %s\n", h.ID) })
}

// GPUs prints the GPUs, only box's and only those in state when set.
func GPUs(ctx context.Context, o Options, box, state string) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) ([]pool.GPU, error) { return c.GPUs(ctx, box, state) }, gpuTable)
}

// SetHealth marks a GPU healthy or unhealthy.
func SetHealth(ctx context.Context, o Options, gpu string, h pool.Health) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.HealthChange, error) {
		return c.SetGPUHealth(ctx, gpu, h)
	},
		func(w io.Writer, ch pool.HealthChange) {
			fmt.Fprintf(w, "gpu %s is %s\n", ch.GPU.ID, ch.GPU.Health)
			if ch.Alloc != nil && ch.Lost != nil {
				remain := "remain"
				if len(ch.Alloc.GPUs) == 1 {
					remain = "remains"
				}
				fmt.Fprintf(w, "allocation %s (host %s) lost it: pair %d on host port %d removed; %s %s\n",
					ch.Alloc.ID, ch.Alloc.Host, ch.Lost.Pair, ch.Lost.HostPort, count(len(ch.Alloc.GPUs), "GPU"), remain)
			}
		})
}

// Allocate lends GPUs to a host as req asks.
func Allocate(ctx context.Context, o Options, req pool.Request) error {
	if req.Host == "" || req.Count <= 0 {
		return apperr.Usage(errors.New("alloc needs --host and --count (at least 1); 'ctl alloc list' lists allocations"))
	}
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Allocation, error) { return c.Allocate(ctx, req) },
		func(w io.Writer, a pool.Allocation) {
			fmt.Fprintln(w, "GPU\tBOX\tPAIR\tHOST PORT")
			for _, g := range a.GPUs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", g.GPU, g.Box, g.Pair, g.HostPort)
			}
			fmt.Fprintf(w, "allocation %s: %s for host %s\n", a.ID, count(len(a.GPUs), "GPU"), a.Host)
		})
}

// Allocations prints the allocations, only host's when set.
func Allocations(ctx context.Context, o Options, host string) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) ([]pool.Allocation, error) {
		return c.Allocations(ctx, host)
	}, allocTable)
}

// eachAllocation applies op to every id in turn, stopping at the first
// refusal, named with verb and the id.
func eachAllocation(ctx context.Context, o Options, ids []string, verb string, op func(*ctlclient.Client, context.Context, string) (pool.Allocation, error), line func(io.Writer, pool.Allocation)) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) ([]pool.Allocation, error) {
		var out []pool.Allocation
		for _, id := range ids {
			a, err := op(c, ctx, id)
			if err != nil {
				if !errors.Is(err, ctlclient.ErrBadID) { // which names the ID itself
					err = fmt.Errorf("%s %s: %w", verb, id, err)
				} else {
					err = fmt.Errorf("%s: %w", verb, err)
				}
				if len(out) > 0 {
					// A failed command prints no result, so the error
					// says what was done before it.
					done := make([]string, len(out))
					for i, a := range out {
						done[i] = a.ID
					}
					err = fmt.Errorf("%w (done before it: %s %s)", err, verb, strings.Join(done, " "))
				}
				return out, err
			}
			out = append(out, a)
		}
		return out, nil
	}, func(w io.Writer, as []pool.Allocation) {
		for _, a := range as {
			line(w, a)
		}
	})
}

// Free releases the allocations ids.
func Free(ctx context.Context, o Options, ids []string) error {
	return eachAllocation(ctx, o, ids, "free", (*ctlclient.Client).Free, func(w io.Writer, a pool.Allocation) {
		fmt.Fprintf(w, "freed %s: %s back from host %s\n", a.ID, count(len(a.GPUs), "GPU"), a.Host)
	})
}

// Rekey gives every pair of the allocations ids a fresh key.
func Rekey(ctx context.Context, o Options, ids []string) error {
	return eachAllocation(ctx, o, ids, "rekey", (*ctlclient.Client).Rekey, func(w io.Writer, a pool.Allocation) {
		have := "have"
		if len(a.GPUs) == 1 {
			have = "has"
		}
		fmt.Fprintf(w, "rekeyed %s: %s of host %s %s a new key\n", a.ID, count(len(a.GPUs), "pair"), a.Host, have)
	})
}

// Drain stops (on) or resumes new allocations on a box and prints the
// allocations still there.
func Drain(ctx context.Context, o Options, box string, on bool) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (ctlclient.DrainResult, error) {
		return c.Drain(ctx, box, on)
	},
		func(w io.Writer, r ctlclient.DrainResult) {
			boxTable(w, []pool.Box{r.Box})
			if len(r.Allocations) > 0 {
				fmt.Fprintf(w, "\nallocations still on %s: %s\n", r.Box.ID, strings.Join(r.Allocations, " "))
			}
		})
}

// RTT prints the measured RTTs or, when any of host, box and rtt is set,
// records one (then all three are needed).
func RTT(ctx context.Context, o Options, host, box string, rtt time.Duration) error {
	if host != "" || box != "" || rtt != 0 {
		if host == "" || box == "" || rtt <= 0 {
			return apperr.Usage(errors.New("recording an RTT needs --host, --box and a positive --rtt"))
		}
		r := pool.RTT{Host: host, Box: box, RTT: pool.Duration(rtt)}
		return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.RTT, error) { return r, c.SetRTT(ctx, r) },
			func(w io.Writer, r pool.RTT) {
				fmt.Fprintf(w, "rtt %s <-> %s = %s\n", r.Host, r.Box, units.Duration(time.Duration(r.RTT)))
			})
	}
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) ([]pool.RTT, error) { return c.RTTs(ctx) },
		func(w io.Writer, rs []pool.RTT) {
			fmt.Fprintln(w, "HOST\tBOX\tRTT")
			for _, r := range rs {
				fmt.Fprintf(w, "%s\t%s\t%s\n", r.Host, r.Box, units.Duration(time.Duration(r.RTT)))
			}
		})
}

// Stats prints the GPU counts by state.
func Stats(ctx context.Context, o Options) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (pool.Stats, error) { return c.Stats(ctx) },
		func(w io.Writer, s pool.Stats) {
			// DRAINING counts GPUs (idle in draining boxes), as the
			// columns before it do; the boxes draining have their own.
			fmt.Fprintln(w, "GPUS\tFREE\tUSED\tUNHEALTHY\tDRAINING\tBOXES\tDRAINING-BOXES\tHOSTS\tALLOCATIONS")
			fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.GPUs, s.Free, s.Used, s.Unhealthy, s.Draining, s.Boxes, s.DrainingBoxes, s.Hosts, s.Allocs)
		})
}

// count is n and noun, plural unless n is 1: 1 GPU, 2 GPUs, 0 pairs.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
