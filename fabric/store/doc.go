// Package store persists the manager's state as keys and values: bbolt (one
// file, no set-up) by default, etcd v3 when several managers share one pool,
// and an in-memory store for tests and the demo.
//
// # Keys
//
// Keys are slash-separated strings; the manager uses
//
//	box/<id>          JSON pool.Box (GPUs with health, no allocation fields)
//	host/<id>         JSON pool.Host
//	rtt/<host>/<box>  JSON pool.RTT
//	alloc/<id>        JSON pool.Allocation: the saga journal (state pending,
//	                  active or releasing, with the GPUs, pair IDs and ports)
//	cred/box/<id>     JSON {"agent_url":"https://...","credential":"<64 hex>"}:
//	cred/host/<id>    the credential issued to the bridge's agent
//
// bbolt keeps them in one bucket "dxpu"; etcd under a prefix (default
// "/dxpu/", so box/b1 is the etcd key "/dxpu/data/box/b1"), so that one etcd
// cluster can hold several pools. The election lives beside the data, under
// "/dxpu/election/": each candidate holds a key tied to its lease, and the
// oldest key's value (the manager's advertised URL) names the leader.
//
// # Damaged files
//
// bbolt maps its file and trusts what it reads there: a file cut short
// faults (SIGBUS) and a damaged page panics. OpenBolt first checks the file
// (CheckBoltFile: the meta pages, the size they need, the freelist and every
// page of the tree) and refuses a damaged one with ErrDamaged, one line that
// says what is wrong and to restore the file or move it aside. An empty file
// becomes a new store.
//
// # Atomicity and fencing
//
// Apply writes a batch of puts and deletes atomically (one bbolt transaction,
// one etcd Txn). With etcd, a store that has won the election (Elector)
// fences every Apply on its leadership: the Txn only succeeds while the
// election key this manager created still exists with the same create
// revision, so a manager that lost its lease (partition, pause) cannot
// overwrite its successor's state; such writes fail with ErrNotLeader.
package store
