package ctl

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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// Options are what every ctl call shares.
type Options struct {
	// Manager is the manager's URL, or several separated by commas.
	Manager string
	// Token is the bearer token when TokenFile is empty.
	Token string
	// TokenFile is a file holding the bearer token.
	TokenFile string
	// JSON prints the API's JSON instead of tables.
	JSON bool
	// Timeout bounds every call that is not a watch.
	Timeout time.Duration
	// CAFile holds PEM CA certificates to trust for an https manager.
	CAFile string
	// CredentialOut, when set, is the new file that gets the agent
	// credential a box or host registration is issued.
	CredentialOut string
	// Stdin is read for the registration file "-"; Stdout gets the output.
	Stdin  io.Reader
	Stdout io.Writer
}

// client checks the options and builds the manager's client.
func (o Options) client() (*ctlclient.Client, error) {
	for _, m := range strings.Split(o.Manager, ",") {
		u, err := url.Parse(strings.TrimSpace(m))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, apperr.Usage(fmt.Errorf("--manager %q: want a URL such as http://127.0.0.1:7700, or several separated by commas", m))
		}
	}
	tok := o.Token
	if o.TokenFile != "" {
		var err error
		if tok, err = manager.LoadTokenFileFor("--token-file", o.TokenFile); err != nil {
			return nil, apperr.Usage(err)
		}
	}
	c := ctlclient.New(o.Manager, tok)
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, apperr.Usage(err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, apperr.Usage(fmt.Errorf("--ca-file %s: no PEM certificate in it", o.CAFile))
		}
		c.HTTP.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

// classify gives manager refusals apperr.ErrFailed and everything else
// apperr.ErrUsage, a 400 among them: the manager found fault with what
// the user typed (a flag's value, an operand, a file), not with the pool.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, apperr.ErrFailed) || errors.Is(err, apperr.ErrUsage) {
		return err // classified where it arose
	}
	var ae *ctlclient.APIError
	if errors.As(err, &ae) && ae.Status != http.StatusBadRequest {
		return apperr.Failed(err)
	}
	return apperr.Usage(err)
}

// call runs f with a client under o.Timeout and prints its result as JSON
// or with table.
func call[T any](ctx context.Context, o Options, f func(ctx context.Context, c *ctlclient.Client) (T, error), table func(w io.Writer, v T)) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	v, err := f(ctx, c)
	if err != nil {
		return classify(err)
	}
	if o.JSON {
		enc := json.NewEncoder(o.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
	table(tw, v)
	return tw.Flush()
}
