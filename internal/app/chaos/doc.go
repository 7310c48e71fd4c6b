// Package chaos is dxpu's fault campaign (dxpu chaos), after etcd's
// functional tester and Jepsen: it starts the real daemons (a manager, a
// UDP switch, two GPU boxes' agents and two hosts' agents) on loopback,
// runs a workload of clients (allocate, free, rekey) while a seeded
// nemesis injects faults (SIGKILL, SIGSTOP/SIGCONT and restart of any
// daemon, rekey storms, credential rotation, client floods, a box's link
// cut or 1% loss on it), records a history of timestamped operations and
// observations, and checks it.
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
//   - every pair of an active allocation is up at both ends within
//     Bounds.PairUp, or the manager reports its allocation degraded with a
//     reason;
//   - both ends of a live pair run the same key generation within
//     Bounds.KeySplit;
//   - no healthy GPU is removed (the nemesis never breaks a GPU, so a GPU
//     marked unhealthy or lost is a healthy one removed);
//   - after the nemesis stops, everything converges within Bounds.Converge:
//     active allocations up, the switch's table version the manager's, and
//     the agents' pairs those of the manager's allocations.
package chaos
