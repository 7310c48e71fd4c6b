package bridgeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
)

// reporter tells the manager what only this agent sees: a pair whose link
// went down. It authenticates with the agent's own credential (the manager
// accepts it on its agent routes only); the admin token never leaves the
// manager.
type reporter struct {
	base   string // "": no manager configured
	cred   func() string
	client *http.Client
	log    *slog.Logger
	// Backoff bounds between attempts (defaults 200ms and 5s).
	minWait, maxWait time.Duration
}

func newReporter(o Options, cred func() string, log *slog.Logger) (*reporter, error) {
	r := &reporter{cred: cred, log: log, minWait: 200 * time.Millisecond, maxWait: 5 * time.Second}
	if o.Manager == "" {
		return r, nil
	}
	u, err := url.Parse(o.Manager)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--manager %q: want an http(s) URL", o.Manager)
	}
	if u.Scheme == "http" && !o.Insecure {
		return nil, fmt.Errorf("--manager %q: plain http would carry the agent credential in clear; use https or --insecure (lab)", o.Manager)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.ManagerCAFile != "" {
		pem, err := os.ReadFile(o.ManagerCAFile)
		if err != nil {
			return nil, fmt.Errorf("--manager-ca-file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--manager-ca-file %s holds no PEM certificate", o.ManagerCAFile)
		}
		tr.TLSClientConfig.RootCAs = roots
	}
	r.base = strings.TrimRight(o.Manager, "/")
	r.client = &http.Client{Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return r, nil
}

// linkDown reports pair p's link down until the manager takes the report,
// answers that no allocation holds the pair (already torn down), removed is
// closed (the manager removed the pair here: it knows), or ctx ends (the
// agent stops). A report in flight is not cut short by the removal, which
// the manager may well make while it handles the report.
func (r *reporter) linkDown(ctx context.Context, removed <-chan struct{}, p manager.Pair, reason string) {
	if r.base == "" {
		r.log.Warn("pair link down; no --manager to report it to: mark its GPU unhealthy by hand", "pair", p.ID, "gpu", p.GPU)
		return
	}
	wait := r.minWait
	for attempt := 1; ; attempt++ {
		status, msg, err := r.post(ctx, p.ID, reason)
		switch {
		case err == nil && status == http.StatusOK:
			r.log.Info("reported pair link down to the manager", "pair", p.ID, "gpu", p.GPU, "attempt", attempt)
			return
		case err == nil && status == http.StatusNotFound:
			r.log.Info("manager holds no allocation for the pair any more; nothing to report", "pair", p.ID)
			return
		case err == nil:
			err = fmt.Errorf("HTTP %d: %s", status, msg)
		}
		select {
		case <-removed:
			r.log.Info("pair removed by the manager; its link-down needs no report", "pair", p.ID, "last_err", err)
			return
		default:
		}
		r.log.Warn("reporting pair link down failed; retrying", "pair", p.ID, "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-removed:
		case <-ctx.Done():
			t.Stop()
			return
		}
		wait = min(2*wait, r.maxWait)
	}
}

func (r *reporter) post(ctx context.Context, pair uint32, reason string) (int, string, error) {
	body, _ := json.Marshal(map[string]string{"reason": reason})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/link-down", r.base, pair), bytes.NewReader(body))
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
