// Package chaos is dxpu's fault campaign (dxpu chaos), after etcd's
// functional tester and Jepsen: it starts the real daemons (a manager, a
// UDP switch, two GPU boxes' agents and two hosts' agents) on loopback,
// runs a workload of clients (allocate, free, rekey) while a seeded
// nemesis injects faults (SIGKILL, SIGSTOP/SIGCONT and restart of any
// daemon, rekey storms, credential rotation, client floods, a box's link
// cut or 1% loss on it, a host agent's API out while its allocations are
// rekeyed), records a history of timestamped operations and observations,
// and checks it.
//
// The two parts that decide anything are pure: Schedule turns a seed into
// the list of faults (same seed, same schedule), and Check turns a history
// into violations. Run is the I/O around them.
//
// What the checker holds the system to:
//
//   - no data corruption: the clients copy random bytes through every live
//     pair into its GPU's VRAM and back (the host agent's copy check,
//     POST /agent/v1/pairs/{id}/copy-check) and compare them; every GPU a
//     host enumerated reads vendor 0x10de and the same PMC_BOOT_0;
//   - every pair of an active allocation is up at both ends, its GPU on
//     its host, within Bounds.PairUp, or the manager reports its
//     allocation degraded with a reason (a host's agent surprise-removes
//     a GPU when its link goes down and plugs it back when it is up: a
//     removal the link's return does not undo is a pair down);
//   - both ends of a live pair run the same key generation within
//     Bounds.KeySplit;
//   - a pair's key generations strictly increase and each names one key:
//     no agent refuses a key as not newer than one it holds, no generation
//     of a pair is seen with two key fingerprints, no agent's generation
//     for a pair goes back;
//   - no healthy GPU is removed (the nemesis never breaks a GPU, so a GPU
//     marked unhealthy or lost is a healthy one removed);
//   - after the nemesis stops, everything converges within Bounds.Converge:
//     active allocations up, the switch's table version the manager's, and
//     the agents' pairs those of the manager's allocations.
package chaos
