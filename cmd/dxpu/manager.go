package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/managerd"
)

// newManagerCmd builds `dxpu manager`, the control plane daemon.
func newManagerCmd(e *env) *cobra.Command {
	var fl managerd.Options
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the control plane: GPU pool, allocation sagas, HTTP API",
		Long: `Manager runs dxpu's control plane. It keeps the pool of GPU boxes and
hosts, lends GPUs to hosts (reserve, program the GPU-side bridge, the switch
table and the host-side bridge, hot-add), and serves the HTTP+JSON API under
/v1, Prometheus metrics on /metrics and /healthz.

State lives in a bbolt file (--store, the default) or, with several managers,
in etcd (--etcd): the managers elect a leader through etcd, the others stand
by and answer 503 not_leader, and a standby takes over within the lease TTL
when the leader dies (at once when it stops cleanly).

Every /v1 call needs "Authorization: Bearer <token>": the admin token read
from --token-file for everything, or the read-only token of
--read-token-file for GETs. Token files must be regular files (a link
to one is followed) owned by the manager's user, mode 0600 (or stricter);
--init-token creates --token-file (0600) with a fresh random token if
nothing is at the path. --no-auth turns authentication off (for a lab only;
it excludes both token files). /healthz and
/metrics stay open.
With --tls-cert and --tls-key the API is served over HTTPS, as it should be
wherever the token crosses a network; the key file (as --etcd-key) is held
to the token files' rules. SIGHUP re-reads --tls-cert/--tls-key and
--etcd-cert/--etcd-key (after a rotation: ACME, cert-manager) and the CA
files --agent-ca-file and --etcd-ca-file (after a CA rotation): new
connections get the new certificate and verify against the new CAs, each
etcd connection for the name or IP address of the endpoint it dials;
those open keep theirs. A file that does not load (missing, not
PEM, a key not the certificate's, or refused as above) is logged in one
line and the previous one stays in use; a success logs the new
certificate's subject, serial and expiry, or the CA file's number of
certificates.

Bridges that register with an "agent_url" are programmed through the agent
API (package fabric/manager/agentapi: PUT/DELETE /agent/v1/pairs/{id},
hot-add, hot-remove, surprise-remove) over https, each with its own
credential, issued when it registered (the admin token never leaves the
manager); --agent-ca-file names the CA of the agents' certificates, and
--allow-insecure-agents permits http agent URLs (lab only). Such a
bridge's "bridge" must give its "ip" ('dxpu bridge agent' speaks UDP, at
ip:udp_port, udp_port 8855 when left out): one without is refused (400).
The switch
follows GET /v1/table?watch=1&version=N. The server times out slow and
idle clients (a request's body must follow its headers within 5s; one
refused before its body is read is answered at once and its connection
closed), caps connections (--max-conns) and watches per client. A
connection is anonymous until a request on it carries a token or an
agent's credential: anonymous connections are capped per address
(--max-anon-conns-per-client) and to three quarters of --max-conns, idle
ones are closed after 5s, and their requests are rate-limited per
address. When room is needed the anonymous connection idle longest is
closed, else the one that has waited longest without sending a whole
request (a slowloris); a quarter of --max-conns is kept for connections
that show a credential (of it, a sixteenth of --max-conns for newcomers
whose first request must carry one). The read-only token and each
agent's credential hold at most --max-conns-per-credential connections
(--max-conns/8), and together leave a sixteenth of --max-conns to the
admin token. So neither a flood without a credential nor one credential
locks out admins, agents or the switch. Connection errors (failed TLS
handshakes) are logged once a second per kind, with a count of the rest.
Request bodies are strict JSON: unknown, misspelled (other case) or
repeated keys, fields only the manager sets and data after the object are
400; a body over 1 MiB is 413.

A bridge agent (a box's or a host's) reports a pair whose link went down
(its peer fell silent) and up again: a pair down longer than
--degraded-after makes its allocation "degraded", with the reason, in ctl
alloc list, the events and dxpu_allocations_degraded; it is active again
when the link is up. A link down never fails the GPU (neither end can tell
a dead GPU from a silent path or a paused peer): GPUs are marked unhealthy
by their box's registration or by 'ctl gpu fail'. A box whose agent does
not answer the reconciler for --unreachable-after is reported "unreachable"
(box, GPUs and the allocations holding them, which are degraded; event
box_unreachable; dxpu_boxes_unreachable), and nothing is removed for it.
The pairs reported down are kept in the store: a restarted manager or a
new leader still knows them.
Exit status: 0 on SIGINT/SIGTERM, 1 when the --store file is damaged (cut
short, overwritten, not a bbolt file: restore it or move it aside; an empty
file becomes a new store) or --listen cannot be bound (the address in use,
as for every daemon), 2 for usage errors or when the store cannot be
opened.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// 0 meant the default in silence; the messages said positive.
			if err := flagsPositive(cmd, "max-conns", "max-anon-conns-per-client", "degraded-after", "unreachable-after"); err != nil {
				return exitCodeError{2, err}
			}
			if fl.ReconcileInterval == 0 {
				return exitCodeError{2, errors.New("--reconcile-interval 0s: want a positive interval, or a negative one for start-up only")}
			}
			fl.Log = e.log
			// Caught from here on: SIGHUP's default action ends the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			fl.HUP = hup
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return exitFor(managerd.Run(ctx, fl), 2)
		},
	}

	f := cmd.Flags()
	f.StringVar(&fl.Store, "store", "dxpu-manager.db", "bbolt file holding the pool (ignored with --etcd)")
	f.StringVar(&fl.Etcd, "etcd", "", "comma-separated etcd v3 endpoints; enables leader election")
	f.StringVar(&fl.EtcdPrefix, "etcd-prefix", "/dxpu/", "key prefix in etcd")
	fl.LeaseTTL = 3
	f.Var(leaseTTL{&fl.LeaseTTL}, "lease-ttl", "leader lease (etcd), in whole seconds: how long a dead leader is waited for")
	f.StringVar(&fl.Listen, "listen", "127.0.0.1:7700", "HTTP listen address")
	f.StringVar(&fl.Advertise, "advertise", "", "http(s) URL other managers and clients should use for this one (default http://<listen>)")
	f.StringVar(&fl.TokenFile, "token-file", "", "file holding the bearer token for mutating calls")
	f.BoolVar(&fl.InitToken, "init-token", false, "create --token-file (mode 0600, a fresh 256-bit token) if it does not exist")
	f.StringVar(&fl.ReadTokenFile, "read-token-file", "", "file holding a read-only token (GETs only; mode 0600)")
	f.BoolVar(&fl.NoAuth, "no-auth", false, "accept every call without a token (lab only; excludes --token-file and --read-token-file)")
	f.StringVar(&fl.AgentCAFile, "agent-ca-file", "", "CA bundle (PEM) that signs the bridges' agent certificates (default: the system's roots)")
	f.BoolVar(&fl.AllowInsecureAgents, "allow-insecure-agents", false, "allow http:// agent URLs (lab only: credentials cross the network in clear)")
	f.IntVar(&fl.MaxConns, "max-conns", manager.DefaultMaxConns, "most concurrent API connections; a quarter is kept for clients with a token or credential; more are answered 503")
	f.IntVar(&fl.MaxAnonConnsPerClient, "max-anon-conns-per-client", manager.DefaultMaxAnonConnsPerClient, "most connections one address holds without a token or credential (positive)")
	f.IntVar(&fl.MaxConnsPerCredential, "max-conns-per-credential", 0, "most connections the read-only token, or one agent's credential, holds (0: --max-conns/8)")
	f.DurationVar(&fl.DegradedAfter, "degraded-after", manager.DefaultDegradedAfter, "how long a pair's link may stay down before its allocation is degraded (positive)")
	f.DurationVar(&fl.UnreachableAfter, "unreachable-after", manager.DefaultUnreachableAfter, "how long a box's agent may fail to answer the reconciler before the box is reported unreachable (positive; its GPUs stay lent)")
	f.StringVar(&fl.EtcdCAFile, "etcd-ca-file", "", "CA (PEM) of an etcd served over https")
	f.StringVar(&fl.EtcdCert, "etcd-cert", "", "client certificate (PEM) for etcd")
	f.StringVar(&fl.EtcdKey, "etcd-key", "", "client key (PEM) for etcd; must be 0600, owned by you")
	f.StringVar(&fl.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM); needs --tls-key")
	f.StringVar(&fl.TLSKey, "tls-key", "", "private key (PEM) of --tls-cert; must be 0600, owned by you")
	f.DurationVar(&fl.ReconcileInterval, "reconcile-interval", 30*time.Second, "how often to reconcile agents with the journal (negative: only at start-up; 0 is refused)")
	return cmd
}
