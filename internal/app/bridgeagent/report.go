package bridgeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// reporter tells the manager what only this agent sees: a pair whose link
// went down, or came back up. It authenticates with the agent's own
// credential (the manager accepts it on its agent routes only); the admin
// token never leaves the manager.
type reporter struct {
	base   string // "": no manager configured
	cred   func() string
	client *http.Client
	// cas: --manager-ca-file's CAs (nil: the system's roots), re-read on
	// SIGHUP (ReloadCredentialOnHUP); new connections verify against them.
	cas *secretfile.CAPool
	log *slog.Logger
	// Backoff bounds between attempts (defaults 200ms and 5s).
	minWait, maxWait time.Duration
}

func newReporter(o Options, cred func() string, log *slog.Logger) (*reporter, error) {
	r := &reporter{cred: cred, log: log, minWait: 200 * time.Millisecond, maxWait: 5 * time.Second}
	if o.Manager == "" {
		return r, nil
	}
	// Bad flags here are usage errors (exit 2), as ctl's --manager.
	u, err := url.Parse(o.Manager)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apperr.Usage(fmt.Errorf("--manager %q: want an http(s) URL", o.Manager))
	}
	if u.Scheme == "http" && !o.Insecure {
		return nil, apperr.Usage(fmt.Errorf("--manager %q: plain http would carry the agent credential in clear; use https or --insecure (lab)", o.Manager))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	var rt http.RoundTripper = tr
	if o.ManagerCAFile != "" {
		if r.cas, err = secretfile.LoadCAPool("--manager-ca-file", o.ManagerCAFile); err != nil {
			return nil, apperr.Usage(err)
		}
		rt = r.cas.Transport(tr)
	}
	r.base = strings.TrimRight(o.Manager, "/")
	r.client = &http.Client{Timeout: 10 * time.Second, Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return r, nil
}

// outcome is how a report ended.
type outcome int

const (
	delivered  outcome = iota // the manager took it
	gone                      // no allocation holds the pair: nothing more to report
	stopped                   // the pair was removed, or the agent stops
	superseded                // the link changed again: report its newer state
)

// report tells the manager that pair p's link is down (reason) or up,
// retrying with backoff until the manager takes it, answers that no
// allocation holds the pair (already torn down), removed is closed (the
// manager removed the pair here: it knows), newer fires (a later link
// state replaces this one) or ctx ends (the agent stops). A report in
// flight is not cut short: the manager may well remove the pair while it
// handles the report, and a newer state goes out after it, in order.
func (r *reporter) report(ctx context.Context, removed, newer <-chan struct{}, p manager.Pair, down bool, reason string) outcome {
	what, words := "link-up", "link up"
	if down {
		what, words = "link-down", "link down"
	}
	wait := r.minWait
	for attempt := 1; ; attempt++ {
		status, msg, err := r.post(ctx, p.ID, what, reason)
		switch {
		case err == nil && status == http.StatusOK:
			r.log.Info("reported pair "+words+" to the manager", "pair", p.ID, "gpu", p.GPU, "attempt", attempt)
			return delivered
		case err == nil && status == http.StatusNotFound:
			r.log.Info("manager holds no allocation for the pair any more; nothing to report", "pair", p.ID, "report", what)
			return gone
		case err == nil:
			err = fmt.Errorf("HTTP %d: %s", status, msg)
		}
		select {
		case <-removed:
			r.log.Info("pair removed by the manager; its "+words+" needs no report", "pair", p.ID, "last_err", err)
			return stopped
		case <-ctx.Done():
			return stopped
		case <-newer:
			return superseded
		default:
		}
		r.log.Warn("reporting pair "+words+" failed; retrying", "pair", p.ID, "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-removed:
			t.Stop()
		case <-newer:
			t.Stop()
			return superseded
		case <-ctx.Done():
			t.Stop()
			return stopped
		}
		wait = min(2*wait, r.maxWait)
	}
}

func (r *reporter) post(ctx context.Context, pair uint32, what, reason string) (int, string, error) {
	body, _ := json.Marshal(map[string]string{"reason": reason})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/%s", r.base, pair, what), bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.cred())
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// linkReports is what a pair's link state reports need: the latest state
// wins. Link events take a sequence number in the order the bridge raises
// them (onEvent runs under the runner's lock); a state older than the one
// recorded is dropped. One goroutine per pair sends, so the manager hears
// the states in the order they came; a newer state cuts the older one's
// retries short.
//
// A host's link-down is the exception: the GPU has left the host (the
// surprise removal is done before the report), so that report goes out
// even when the link came up meanwhile, and the up after it, once the GPU
// is plugged in again (Agent.linkUp).
type linkReports struct {
	seq atomic.Uint64 // the last sequence number taken

	mu      sync.Mutex
	applied uint64 // sequence number of the state below
	settled uint64 // sequence number of the last state reported (or needing none)
	down    bool   // the state the manager should know
	reason  string
	// removed: a host's link-down to report whatever came after it.
	removed       bool
	removedReason string
	told          told // what the manager knows of the link
	over          bool // the pair was removed, or the agent stops: report nothing more
	sending       bool // a sender goroutine runs
	newer         chan struct{}
}

// told is what the manager knows of a pair's link.
type told int

const (
	toldUp    told = iota // the link up (or nothing: no allocation held the pair)
	toldDown              // the link down
	toldMaybe             // a report went out and did not come back: it may know either
)

// knows says whether the manager knows the link down (or up).
func (t told) knows(down bool) bool { return t == toldDown && down || t == toldUp && !down }

// due says whether a report is to go out (called with mu held).
func (l *linkReports) due() bool {
	return !l.over && (l.removed || l.settled != l.applied && !l.told.knows(l.down))
}

// setLink records pair pr's link state as of event seq and makes sure a
// sender reports it. It does not block.
func (a *Agent) setLink(pr *pairRun, seq uint64, down bool, reason string) {
	l := &pr.link
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return
	}
	if down && a.o.Role == bridge.RoleHost {
		l.removed, l.removedReason = true, reason
	}
	if seq > l.applied {
		l.applied, l.down, l.reason = seq, down, reason
	}
	if l.newer == nil {
		l.newer = make(chan struct{}, 1)
	}
	if l.sending {
		select {
		case l.newer <- struct{}{}:
		default:
		}
		return
	}
	if !l.due() {
		l.settled = l.applied // the manager knows (an up with no down before it: nothing to say)
		return
	}
	if a.rep.base == "" {
		if a.o.Role == bridge.RoleHost && l.removed {
			a.log.Warn("pair link down; no --manager to report it to (the GPU comes back on the host when the link is up)", "pair", pr.p.ID, "gpu", pr.p.GPU)
		}
		// A box without --manager said so once, at start.
		l.removed, l.settled = false, l.applied
		return
	}
	l.sending = true
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.sendLink(pr) }()
}

// sendLink reports pair pr's link state until the manager knows the
// latest one.
func (a *Agent) sendLink(pr *pairRun) {
	l := &pr.link
	for {
		l.mu.Lock()
		select {
		case <-l.newer: // read below: the state is the newest
		default:
		}
		if !l.due() {
			l.settled, l.sending = l.applied, false
			l.mu.Unlock()
			return
		}
		seq, down, reason, newer := l.applied, l.down, l.reason, l.newer
		sticky := l.removed
		if sticky {
			down, reason, newer = true, l.removedReason, nil // nothing supersedes it
		}
		l.told = toldMaybe // from the first attempt on, the manager may have it
		l.mu.Unlock()
		out := a.rep.report(a.ctx, pr.ctx.Done(), newer, pr.p, down, reason)
		l.mu.Lock()
		switch out {
		case delivered, gone:
			l.told = toldUp // gone: no allocation holds the pair, no state to undo
			if down && out == delivered {
				l.told = toldDown
			}
			if sticky {
				l.removed = false
			} else {
				l.settled = seq
			}
		case stopped:
			l.over = true
		}
		l.mu.Unlock()
	}
}
