package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/pool"
)

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// nemesis plays the schedule; it returns when the last fault is healed.
func (c *campaign) nemesis(ctx context.Context, sched []Fault) time.Duration {
	var end time.Duration
	for _, f := range sched {
		select {
		case <-ctx.Done():
			return c.now()
		case <-time.After(time.Until(c.start.Add(f.At))):
		}
		c.record(Event{T: c.now(), Kind: EvFault, Name: f.Kind, Subject: f.Target})
		c.o.Log.Info("chaos: fault", "fault", f.String())
		heal := c.inject(ctx, f)
		if f.For > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(f.For):
			}
		}
		err := heal()
		e := Event{T: c.now(), Kind: EvHeal, Name: f.Kind, Subject: f.Target}
		if err != nil {
			e.Err = err.Error()
		}
		c.record(e)
		end = e.T
	}
	return end
}

// inject starts fault f and returns what heals it.
func (c *campaign) inject(ctx context.Context, f Fault) func() error {
	p := c.procs[f.Target]
	none := func() error { return nil }
	switch f.Kind {
	case FaultKill:
		_ = p.signal(syscall.SIGKILL)
		p.wait(5 * time.Second)
		return p.start
	case FaultStop:
		_ = p.signal(syscall.SIGSTOP)
		return func() error { return p.signal(syscall.SIGCONT) }
	case FaultRestart:
		_ = p.signal(syscall.SIGTERM)
		var err error
		if !p.wait(5 * time.Second) {
			err = chaosError("still running 5s after SIGTERM; killed")
			p.kill()
		}
		c.op("graceful_stop", f.Target, err)
		return p.start
	case FaultLinkCut:
		cb := c.cables[f.Target]
		cb.cut.Store(true)
		return func() error { cb.cut.Store(false); return nil }
	case FaultLoss:
		cb := c.cables[f.Target]
		cb.lossPPM.Store(LossPercent * 10000)
		return func() error { cb.lossPPM.Store(0); return nil }
	case FaultRotateCredential:
		// Re-registering issues a new credential: the agent gets it in
		// its file and re-reads it on SIGHUP, as an operator rotates one.
		cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		var cred string
		var err error
		if b, ok := c.boxes[f.Target]; ok {
			_, cred, err = c.ctl.RegisterBoxAgent(cctx, b)
		} else {
			_, cred, err = c.ctl.RegisterHostAgent(cctx, c.hosts[f.Target])
		}
		if err == nil && cred == "" {
			err = errNoCredential
		}
		if err == nil {
			err = c.writeCred(f.Target, cred)
		}
		if err == nil {
			err = p.signal(syscall.SIGHUP)
		}
		c.op("rotate_credential", f.Target, err)
		return none
	case FaultAPIOutage:
		if _, ok := c.hosts[f.Target]; !ok {
			return none
		}
		return c.apiOutage(ctx, f, p)
	case FaultRekeyStorm:
		c.storm(ctx, f.Count, "rekey", func(cctx context.Context, r *rand.Rand, ids []string) (string, error) {
			if len(ids) == 0 {
				return "", nil
			}
			id := ids[r.IntN(len(ids))]
			_, err := c.ctl.Rekey(cctx, id)
			return id, err
		})
		return none
	case FaultClientFlood:
		c.storm(ctx, f.Count, "flood", func(cctx context.Context, r *rand.Rand, _ []string) (string, error) {
			switch r.IntN(3) {
			case 0:
				_, err := c.ctl.Allocations(cctx, "")
				return "list allocations", err
			case 1:
				_, err := c.ctl.GPUs(cctx, "", "")
				return "list gpus", err
			}
			// More GPUs than the pool has: refused, but it takes the
			// allocation path.
			_, err := c.ctl.Allocate(cctx, pool.Request{Host: "host1", Count: 64})
			return "allocate 64", err
		})
		return none
	}
	return none
}

// apiOutage starts an api_outage of host f.Target (issue 20, finding 3):
// its agent's credential file gets a credential the manager does not know
// and a SIGHUP, without re-registering, so the agent refuses the manager
// while its data plane runs on. Then every live allocation of the host
// (one allocated first if it has none) is rekeyed, at once and again
// halfway through: each rekey must fail and leave the pair on its old key
// at both ends. The observer and the copies use the agent's new
// credential meanwhile, so the pairs stay in view. What it returns puts
// the registered credential back, with a SIGHUP.
func (c *campaign) apiOutage(ctx context.Context, f Fault, p *proc) func() error {
	host := f.Target
	c.mu.Lock()
	registered := c.creds[host]
	c.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	ids := c.liveAllocations(cctx, host)
	if len(ids) == 0 {
		a, err := c.ctl.Allocate(cctx, pool.Request{Host: host, Count: 1, RequestID: fmt.Sprintf("api-outage-%d", f.At.Milliseconds())})
		c.op("alloc", a.ID+" for "+host+" (api outage)", err)
		if err == nil {
			ids = append(ids, a.ID)
		}
	}
	cancel()
	// swap writes cred, signals and waits until the agent answers its
	// status under cred (it re-read the file).
	swap := func(cred, what string) error {
		err := c.writeCred(host, cred)
		if err == nil {
			err = p.signal(syscall.SIGHUP)
		}
		if err == nil {
			err = c.untilAgentTakes(ctx, host, cred)
		}
		c.op("api_outage", host+" "+what, err)
		return err
	}
	if err := swap(randomSecret(), "credential replaced"); err != nil {
		return func() error { return swap(registered, "credential restored") }
	}
	rekeyAll := func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for _, id := range ids {
			_, err := c.ctl.Rekey(cctx, id)
			c.op("rekey", id+" (api outage)", err)
		}
	}
	rekeyAll()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.For / 2):
		}
		rekeyAll()
	}()
	return func() error {
		<-done
		return swap(registered, "credential restored")
	}
}

// liveAllocations lists host's active and degraded allocations.
func (c *campaign) liveAllocations(ctx context.Context, host string) []string {
	as, err := c.ctl.Allocations(ctx, "")
	if err != nil {
		return nil
	}
	var ids []string
	for _, a := range as {
		if a.Host == host && (a.State == pool.StateActive || a.State == pool.StateDegraded) {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// untilAgentTakes waits up to 5s for agent name to answer its status
// under cred.
func (c *campaign) untilAgentTakes(ctx context.Context, name, cred string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := agentStatus(cctx, c.http, c.agents[name], cred)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: its status still refused the new credential 5s after SIGHUP: %w", name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type chaosError string

func (e chaosError) Error() string { return string(e) }

const errNoCredential = chaosError("the manager issued no agent credential")

// isRefusal: the manager answered the call with an error of its own (too
// many GPUs asked for, or too many connections).
func isRefusal(err error) bool {
	var ae *ctlclient.APIError
	return errors.As(err, &ae)
}

// storm runs n calls of call at once against the live allocations; each
// is an op of the history.
func (c *campaign) storm(ctx context.Context, n int, name string, call func(context.Context, *rand.Rand, []string) (string, error)) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var ids []string
	if as, err := c.ctl.Allocations(cctx, ""); err == nil {
		for _, a := range as {
			if a.State == pool.StateActive || a.State == pool.StateDegraded {
				ids = append(ids, a.ID)
			}
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), uint64(n)))
			subj, err := call(cctx, r, ids)
			if name == "flood" && isRefusal(err) {
				// The manager shedding or refusing a flood is its
				// answer, not a failure.
				subj, err = subj+" refused", nil
			}
			if subj != "" {
				c.op(name, subj, err)
			}
		}()
	}
	wg.Wait()
}
