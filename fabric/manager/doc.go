// Package manager is dxpu's control plane: it owns the GPU pool
// (fabric/pool), persists it (fabric/store), lends GPUs to hosts through a
// hot-plug saga, publishes the switch's forwarding table, and serves an
// HTTP+JSON API. Build one in-process with New(Config) and serve Handler();
// `dxpu manager` is the daemon around it.
//
// # The allocation saga
//
// Allocate(host, count, constraints) runs, for every GPU of the request:
//
//	reserve       pool.Reserve picks GPUs, pair IDs and host ports (all or nothing)
//	journal       alloc/<id> = {"state":"pending", ...} written to the store
//	gpu_bridge    GPUBridgeProgrammer.ProgramPair   (box bridge: pair -> local GPU)
//	switch        forwarding table + SwitchProgrammer.ProgramPair
//	host_bridge   HostBridgeProgrammer.ProgramPair  (host bridge: vDSP -> pair)
//	hot_add       HostBridgeProgrammer.HotAdd       (the host enumerates the GPU)
//	activate      alloc/<id> = {"state":"active", ...}
//
// A failed step undoes the steps started, in reverse (HotRemove, RemovePair
// on host bridge, switch, GPU bridge), deletes the journal entry and frees
// the GPUs; the caller gets 502 agent_failed naming the step and pair. If an
// undo itself fails, the allocation stays journaled as "releasing" and the
// reconciler finishes it. Every agent call is idempotent.
//
// Release journals "releasing", undoes every step, deletes the entry. GPU
// failure (POST /v1/gpus/{id}/health {"health":"unhealthy"}) takes only that
// GPU out of its allocation: the host bridge gets SurpriseRemove for that
// pair, the pair is removed from host bridge, switch and GPU bridge, and the
// allocation records the GPU under "lost".
//
// # Crash recovery and reconciliation
//
// The journal is written before any agent is touched, so after a crash
// (SIGKILL included) every programmed pair belongs to a journaled
// allocation. At start-up, and whenever a manager becomes leader, it loads
// the store, puts every active allocation's pairs in the forwarding table
// before it answers as leader (a switch following it never sees a new
// leader's table empty), and reconciles: pending allocations (the saga was
// cut short) are rolled back, releasing ones are finished, active ones are
// re-applied (idempotent steps fill in whatever an agent lost). Agents that
// implement PairLister (or, like the HTTP
// agents of package agentapi, AgentPairLister, asked at every bridge's
// agent URL) are also swept: pairs no allocation holds are removed, active
// pairs they lost are programmed again; the sweep repeats every
// ReconcileInterval and on Reconcile.
//
// # Pair keys
//
// The manager holds each pair's key in memory and its generation counter
// in the store (keygen/<pair id>, written before a key under it is sent;
// KEY-9..KEY-12 in docs/protocol.md). Re-applying an active pair after a
// restart, and every rekey, is a two-phase key change: both agents install
// the key (key_pending), then both switch; a failure leaves the old key in
// use and the reconciler retries the change. An end the sweep restores
// gets the key its peer holds, never one drawn for it alone.
//
// # Agents
//
// In-process agents implement the programmer interfaces directly (the demo;
// fakeagent for tests, which can fail any call and keep its state in a
// file). `dxpu manager` uses agentapi: a bridge that registers with an
// "agent_url" gets each step as an HTTP call, and must give its bridge's
// IP (its agent speaks UDP only: ErrInvalid naming bridge.ip otherwise);
// one without is expected to follow the forwarding table.
//
// # Credentials
//
// Tokens are roles. The admin token (Config.Token) allows every call; the
// read-only token (Config.ReadToken) allows GETs only (a switch following
// the table, dashboards, hosts watching events). Neither ever leaves the
// manager. Token files are loaded with LoadTokenFile, which refuses a file
// group or others may access (mode 0600 or stricter), one another user
// owns, a symbolic link and anything but a regular file (a FIFO would
// block), and made with CreateTokenFile (256 random bits, a new 0600 file):
// the checks of fabric/secretfile.
//
// Every agent has its own credential: when a box or host registers with an
// agent_url, the manager issues one (crypto/rand, 256 bits), stores it
// beside the bridge (cred/box/<id>, cred/host/<id>) and answers it in the
// registration, as "agent_credential", to the caller, who holds the admin
// token. The operator (or provisioning) puts it in a 0600 file on the
// bridge's machine; the bridge's agent (agentapi.Server) accepts exactly
// that credential and nothing else. The manager calls each agent with that
// agent's credential only. Re-registering with the same agent_url keeps the
// credential (so a restarted bridge can be told it again); a new agent_url
// gets a new one, and removing the bridge or its agent_url drops it.
// Agents are reached over https only; Config.AllowInsecureAgents allows
// http agent URLs for a lab. No GET answer carries a credential.
//
// # Registration
//
// Registration refuses (409 conflict, naming the other bridge) a bridge
// whose switch port and MAC, or IP and UDP port, another box or host has:
// the table would send both ends of a pair to one place. A box or host with
// GPUs lent may re-register only with the same endpoint (switch port, MAC,
// IP, UDP port) and agent URL, else 409 in_use naming the lent GPUs and
// allocations; a lent GPU keeps every field it was lent with (a field left
// out keeps its value, a different one is 409 in_use).
//
// # Serving
//
// NewServer wraps Handler in an http.Server with read-header, read, write
// and idle timeouts and a header cap (ServerConfig), and caps the table and
// event watches one client address holds (429 too_many_watches); a watch
// answers before the write deadline whatever timeout it asks (at most
// MaxWatch). LimitListener caps connections: one over the cap is answered
// 503 unavailable and closed, so descriptors stay bounded. Admission is per
// client (admission.go): a connection is anonymous until a request on it
// carries a token or an agent's credential; anonymous connections are
// capped per address and together (a quarter of the cap is reserved for
// credentialed clients), idle ones are cut first and after 5s, then the
// ones that have not sent a whole request (slowloris), oldest first, and
// anonymous requests are rate-limited per address (429 rate_limited), so a
// tokenless flood, from however many addresses, does not lock out admins,
// agents or the switch. The read-only token and each agent credential hold
// at most ConnLimits.MaxConnsPerCredential connections (MaxConns/8) and
// together leave ConnLimits.AdminReserved to the admin token: one more is
// 503 unavailable, closed. The server's per-connection error lines (failed
// TLS handshakes) are logged once a second per kind, with a count of the
// rest.
//
// # High availability
//
// With an etcd store the managers campaign for leadership; the leader loads
// the pool and serves, standbys answer /v1 calls with 503 not_leader (naming
// the leader) and /healthz with "role":"standby". Writes are fenced on the
// leader's election key, so a deposed leader cannot write. A leader that
// dies is replaced after its lease TTL; one that stops cleanly resigns and
// is replaced at once.
//
// # HTTP API
//
// Every /v1 call needs "Authorization: Bearer <token>": GETs the read-only
// or the admin token, mutating calls (POST, PUT, DELETE) the admin token.
// Without a known token: 401 unauthorized; the read-only token on a
// mutating call: 403 forbidden; nothing changed either way. /healthz and
// /metrics need no token (probes and Prometheus; they name no bridge, only
// counts and this manager's role and ID). Bodies are one JSON object;
// unknown fields, keys spelled in another case or given twice, fields only
// the manager sets (a GPU's allocation, unreachable, a host's used_ports),
// data after the object, malformed JSON and missing fields are 400
// bad_request, with the field or byte offset named; a body over 1 MiB is
// 413. An error repeats at most 128 bytes of a path or ID. Errors are
//
//	{"error": {"code": "insufficient_gpus", "message": "not enough free GPUs: host \"h1\" asked for 5, 1 free and eligible"}}
//
// with the stable codes of the Code* constants. Routes:
//
//	GET    /healthz                     {"status":"ok","role":"leader","id":"http://10.0.0.5:7700"}
//	GET    /metrics                     Prometheus text format
//	GET    /v1/stats                    GPU counts by state
//	GET    /v1/boxes                    {"boxes":[Box...]}; a box (and its GPUs in
//	                                    it and in /v1/gpus) whose agent has not
//	                                    answered past Config.UnreachableAfter has
//	                                    "unreachable": {"since","reason"}
//	GET    /v1/boxes/{id}               Box
//	POST   /v1/boxes                    register or replace a box -> Box plus
//	                                    "agent_credential" when it has an agent_url
//	DELETE /v1/boxes/{id}               remove (409 in_use while a GPU is lent)
//	POST   /v1/boxes/{id}/drain         {"box":Box,"allocations":["a-..."]}
//	POST   /v1/boxes/{id}/undrain
//	GET    /v1/hosts, /v1/hosts/{id}
//	POST   /v1/hosts                    register or replace a host (same answer)
//	DELETE /v1/hosts/{id}
//	GET    /v1/gpus?box=B&state=free|used|unhealthy
//	GET    /v1/gpus/{id}
//	POST   /v1/gpus/{id}/health         {"health":"unhealthy"|"healthy"}
//	GET    /v1/rtt, PUT /v1/rtt         {"host":"h1","box":"b1","rtt":"12us"}
//	GET    /v1/allocations?host=H       {"allocations":[Allocation...]}
//	POST   /v1/allocations              Request -> 201 Allocation (200 and the same
//	                                    allocation for a retried "request_id")
//	GET    /v1/allocations/{id}
//	DELETE /v1/allocations/{id}         release
//	POST   /v1/allocations/{id}/rekey   a fresh key for every pair (both bridges change keys without loss)
//	                                    (both: 409 busy naming the change under way, "being
//	                                    rekeyed", "being released", ... while another runs)
//	GET    /v1/events?since=S&host=H&watch=1&timeout=30s
//	                                    {"events":[Event...],"next":S'}: allocated,
//	                                    released, gpu_failed (pair, host_port),
//	                                    gpu_health (box, gpus, healthy: true or
//	                                    false, the health it changed to),
//	                                    allocation_degraded and _recovered (pair,
//	                                    reason), box_unreachable and _reachable
//	                                    (reason), drains, registrations; long-polls
//	                                    with watch
//	GET    /v1/table                    table.Table
//	GET    /v1/table?watch=1&version=N&timeout=30s
//	                                    returns when the version differs from N
//	                                    (at once if it already does), or after
//	                                    timeout with the unchanged table
//	POST   /v1/agent/pairs/{id}/link-down {"reason":"..."}, with an agent's own
//	                                    credential instead of a token: a bridge
//	                                    agent (the host's or the box's) reports
//	                                    its pair's link down: the allocation is
//	                                    degraded once the link stays down past
//	                                    Config.DegradedAfter; the GPU stays lent
//	                                    and healthy (see agentreport.go); the
//	                                    report is kept in the store, so a
//	                                    restarted manager or new leader keeps it
//	POST   /v1/agent/pairs/{id}/link-up   the link is up again: active again
//
// A worked allocation:
//
//	POST /v1/allocations
//	{"host":"h1","count":2,"model":"H100","min_memory_mib":81920,"max_rtt":"20us"}
//
//	201 Created
//	{"id":"a-3f9c0b6e21d4","host":"h1","state":"active",
//	 "gpus":[{"gpu":"box7-g0","box":"box7","pair":41,"host_port":0},
//	         {"gpu":"box7-g1","box":"box7","pair":42,"host_port":1}],
//	 "request":{"host":"h1","count":2,"model":"H100","min_memory_mib":81920,"max_rtt":"20us"}}
//
// A box registration:
//
//	POST /v1/boxes
//	{"id":"box7","location":{"pod":"p1","rack":"r3"},"agent_url":"https://10.1.0.7:7701",
//	 "bridge":{"switch_port":"eth3","mac":"02:00:00:00:07:00","ip":"10.1.0.7","udp_port":4791},
//	 "gpus":[{"id":"box7-g0","model":"H100","memory_mib":81920,"bdf":"0000:18:00.0","pcie_switch":0,"pcie_port":0}]}
//
//	200 OK
//	{"id":"box7", ... the box as registered ...,
//	 "agent_credential":"9f2c...(64 hex digits)"}
//
// The table version starts, for each leader term, at the wall clock in
// microseconds, and grows by one per change, so a switch following an old
// leader's version sees a change when a new leader takes over.
package manager
