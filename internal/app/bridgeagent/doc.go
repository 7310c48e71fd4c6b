// Package bridgeagent is `dxpu bridge agent`: a bridge daemon that joins
// the control plane. It serves the agent API (package
// fabric/manager/agentapi) that the manager's allocation saga calls, runs
// one dxpu bridge per pair it is given, and, on a host, drives the hot-plug
// of its host: an emulated host (emu/host on the wall clock) whose virtual
// switch ports receive the lent GPUs, or (--vm) a QEMU guest the agent boots
// and keeps up, into which the lent GPUs are hot-plugged as proxy devices.
//
// # Deployment
//
// Four kinds of machine: the manager, the switch, hosts and GPU boxes.
// Each secret stays where it is needed:
//
//	secret                 made by                        held by
//	admin token            dxpu manager --init-token      the manager, the operator's ctl
//	read-only token        the operator (0600 file, random)  the manager (--read-token-file), the switch
//	agent credential       the manager, at registration   the manager, that one agent (0600 file)
//
// The agents never see a token: the manager calls each agent with that
// agent's credential, and a host's agent reports to the manager with its
// own credential on the manager's agent route (below).
//
// Manager (admin and read-only tokens in 0600 files):
//
//	dxpu manager --listen 10.0.0.2:7700 --store pool.db --token-file admin.tok --init-token \
//	    --read-token-file read.tok --tls-cert mgr.pem --tls-key mgr.key --agent-ca-file agents-ca.pem
//
// Register every box and host with the agent_url its daemon will serve,
// and keep the credential the manager issues (copy it to that machine,
// mode 0600):
//
//	dxpu ctl --manager https://10.0.0.2:7700 --token-file admin.tok box add box0.json --agent-credential-out box0.cred
//	dxpu ctl --manager https://10.0.0.2:7700 --token-file admin.tok host add h1.json --agent-credential-out h1.cred
//
// box0.json names the bridge endpoint and the GPUs; h1.json likewise, with
// "ports":32 (the emulated host's virtual switch has 32 hot-plug
// downstream ports):
//
//	{"id":"box0","agent_url":"https://10.77.2.2:7701",
//	 "bridge":{"switch_port":"s-gpu0","mac":"02:77:00:00:00:02","ip":"10.77.2.2","udp_port":4791},
//	 "gpus":[{"id":"box0-g0","model":"H100","memory_mib":81920,"bdf":"0000:18:00.0"}]}
//
// The switch follows the manager's table with the read-only token:
//
//	dxpu switch --mode udp --udp-listen 0.0.0.0:8855 --manager https://10.0.0.2:7700 --token-file read.tok
//
// GPU boxes and hosts run their agents:
//
//	dxpu bridge agent --role gpu --box box0.json --agent-listen 10.77.2.2:7701 \
//	    --agent-cert box0.pem --agent-key box0.key --agent-credential-file box0.cred \
//	    --listen 10.77.2.2:4791 --switch 10.77.2.1:8855 --manager https://10.0.0.2:7700 --manager-ca-file mgr-ca.pem
//	dxpu bridge agent --role host --host-id h1 --agent-listen 10.77.1.2:7701 \
//	    --agent-cert h1.pem --agent-key h1.key --agent-credential-file h1.cred \
//	    --listen 10.77.1.2:4791 --switch 10.77.1.1:8855 --manager https://10.0.0.2:7700 --manager-ca-file mgr-ca.pem
//
// Then `dxpu ctl alloc --host h1 --count 2` returns once the host has
// enumerated the GPUs, and `dxpu ctl free ID` takes them away.
//
// A lab without certificates uses http everywhere: --allow-insecure-agents
// on the manager, --insecure on the agents (the credentials then cross the
// network in clear). TestDeployment runs exactly this flow, every daemon a
// process in its own network namespace.
//
// # What the saga does here
//
//	PUT    /agent/v1/pairs/{id}     box: a bridge for the pair and a fresh emulated GPU of
//	                                the pair's model (or a memory device, --pcie memory);
//	                                host: a bridge for the pair
//	POST   .../{id}/hot-add         host: wait for the pair's link (the handshake across the
//	                                switch), plug the GPU into downstream port host_port and
//	                                let the emulated host enumerate it (vendor 10de) and read
//	                                its BOOT_0 register through the fabric
//	                                (--vm: QMP device_add of a proxy device on the pair's
//	                                bridge into the guest, which enumerates it, enables it
//	                                and reads BOOT_0; the call returns once it has)
//	POST   .../{id}/hot-remove      host: the device leaves the host in order (--vm:
//	                                device_del, and the guest sees it go)
//	POST   .../{id}/surprise-remove host: the device is gone without warning
//	DELETE /agent/v1/pairs/{id}     the pair's bridge (and device) stop
//	GET    /agent/v1/pairs          the pairs running, for reconciliation
//	GET    /agent/v1/status         pairs (link state, key_generation, key_fingerprint,
//	                                keys_refused, mtu_bytes, max_payload_bytes and the
//	                                peer_max_payload_bytes the far end announced) and
//	                                (host) slots, as JSON
//	POST   .../{id}/copy-check      host (emulated): write {"offset","data"} into the GPU's
//	                                VRAM through BAR1 and answer what reads back, over the pair
//
// Every call needs the agent's credential; each is idempotent. A pair for
// another box, host, GPU or host port, a model that cannot be emulated, or
// a GPU or port another pair holds is refused (the manager rolls back).
//
// # Data plane
//
// One UDP socket per agent, on --listen: the registered bridge endpoint
// (ip, udp_port) through which the switch reaches every pair of the box or
// host. Frames are demultiplexed by the 24-bit pair ID of the dxpu header
// (bytes 2..4; package tlp/encap). Frames for pairs the agent does not run,
// too short or of another version are dropped and counted (status:
// frames_unknown_pair, frames_malformed; --metrics:
// dxpu_agent_dropped_unknown_pair_total, dxpu_agent_dropped_malformed_total);
// a pair that does not read its frames fast enough loses the next ones
// (frames_overflow, dxpu_agent_dropped_overflow_total) and its bridge
// retransmits. Frames go to --switch (the UDP switch relays them to the far
// end's registered ip:udp_port) or, without --switch, straight to the far
// end's registered ip:udp_port, routed through whatever switch lies
// between. Frames are accepted from any source: the switch checks that each
// pair's frames come from its registered endpoints.
//
// # Metrics
//
// With --metrics ADDR (Options.Metrics; empty, the default: off) the agent
// serves GET /metrics (Prometheus) on ADDR, bounded as the bridge's and the
// switch's (httpguard.MetricsDefaults: 64 connections, 8 per address, 30s
// idle). Every programmed pair's bridge counters come in the families
// `dxpu bridge --metrics` serves (driver.Collector: dxpu_bridge_*_total,
// dxpu_bridge_tags_in_use, dxpu_bridge_srtt_seconds, the drop reasons,
// dxpu_bridge_timer_late_*), labelled pair and role; the agent's own are
// labelled role:
//
//	dxpu_agent_pairs                        pairs programmed (a bridge each)
//	dxpu_agent_pairs_up                     of those, pairs whose link is up
//	dxpu_agent_pairs_steered                of those, pairs the kernel steers to a socket of their own
//	dxpu_agent_dropped_unknown_pair_total   frames for a pair not programmed here
//	dxpu_agent_dropped_malformed_total      frames too short or of another version for a pair ID
//	dxpu_agent_dropped_overflow_total       frames dropped because their pair's queue was full
//
// A pair's series appear with its programming and are gone from the scrape
// after its removal; a reprogrammed pair (anything but its key changed)
// starts a new bridge, whose counters start from 0.
//
// # Link down
//
// A host's pair whose link goes down (the GPU box's daemon died or
// paused, or the path did: --dead-after of silence) is surprise-removed
// from the emulated host at once, as a real switch port reports a link
// down, and reported to the manager:
//
//	POST /v1/agent/pairs/{id}/link-down   {"reason":"peer silent for 1s"}
//	Authorization: Bearer <this agent's credential>
//
// The host cannot tell a dead GPU from a silent fabric or its own pause,
// so the manager takes this as the pair down, not the GPU failed: the
// allocation is degraded once the link stays down past its
// --degraded-after. When the link comes up again the agent hot-adds the
// GPU back through the pair's slot (enumerated, BOOT_0 read through the
// fabric) and then reports link-up: the allocation is active again. The
// agent retries a report (200 ms doubling to 5 s) until the manager takes
// it, answers 404 (no allocation holds the pair any more), or removes the
// pair. This route is the agent's own: the admin token stays on the
// manager, and an agent may report only on pairs whose host or box it is.
//
// A GPU box's pair whose link goes down (the host side fell silent: the
// host or the path died; the GPU is fine) is reported the same way, and
// again when the link is up:
//
//	POST /v1/agent/pairs/{id}/link-down   {"reason":"peer silent for 1s"}
//	POST /v1/agent/pairs/{id}/link-up     {}
//
// The manager shows the allocation degraded, with the reason, while the
// link stays down past its --degraded-after, and active again once it is
// up; the GPU stays lent. Each pair's reports go out in the order of its
// link events, one at a time, and the latest state wins: a link-up cuts
// short the retries of the link-down before it, and the other way round (a
// host's link-down excepted: the GPU has left the host, so it is reported
// whatever follows, and the link-up after the GPU is back). A box agent
// without --manager reports nothing, and says so once at start.
//
// # A host that is a QEMU guest
//
// With --vm (Options.VM) the host's PCIe side is a guest (package
// internal/app/vm: kernel, busybox and dxpu-guest found as `dxpu vm` finds
// them) booted before the agent API serves, with no GPU, its tool watching
// the PCI bus (dxpu-guest run --watch). The pair's bridge runs from its
// programming, as on the emulated host; the hot-add joins QEMU's proxy
// socket to it (vm.AttachedGPU). A link down answers the guest's access in
// flight with all ones and device_dels the function (QEMU has no surprise
// removal of a proxy device: the guest's hot-plug driver sees it ejected).
// On q35 each hot-plug slot is a PCIe root port reserving 64 MiB of the
// guest's 32-bit MMIO window, so the guest takes GPUs on its first 8
// registered ports; pairs on higher ports are refused. The agent's end
// (SIGTERM) quits QEMU (QMP quit, killed after 10 s); QEMU also dies with
// the agent's process (parent-death signal). The other way round, a guest
// that can take no more GPUs (its tool exited, QEMU died) ends the agent:
// `dxpu bridge agent` exits 1 with one line saying why (vm.ErrHostLost),
// rather than serve on as a host with nothing behind its pairs; its
// supervisor starts it again with a fresh guest, and the manager meanwhile
// finds the agent unreachable.
//
// A restarted agent starts with no pairs; the manager's reconciliation (at
// its start-up and every --reconcile-interval) programs and hot-adds the
// pairs of active allocations again. Every bridge starts with a random
// seed, so a restarted daemon opens a new session that its peer recognises.
package bridgeagent
