/*
 * dxpu_bridge.h: the C ABI of dxpu's sans-I/O bridge core (package
 * github.com/dxpu/dxpu/bridge), for firmware and programs that carry PCIe
 * TLPs between a host-side and a GPU-side bridge themselves: on a
 * SmartNIC's or DPU's Linux cores, or in any language with a C FFI.
 *
 * Build the library from the repository root:
 *
 *   go build -buildmode=c-archive -o libdxpubridge.a ./cmd/libdxpubridge
 *   go build -buildmode=c-shared  -o libdxpubridge.so ./cmd/libdxpubridge
 *
 * and link with -lpthread (the archive carries the Go runtime). Cross-build
 * for Arm cores with GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
 * (scripts/cross-build.sh). This header is the interface; the header cgo
 * writes beside the library is an implementation detail.
 *
 * The protocol (frame formats, state machine, timers, credits) is specified
 * in docs/protocol.md; the library is the same Go code the dxpu daemon runs.
 *
 * MODEL. A bridge owns no socket, thread or clock. The caller feeds it
 * inputs and polls its outputs:
 *
 *   in:  dxpu_bridge_handle_frame  a frame from the fabric (UDP payload, or
 *                                  what follows the EtherType)
 *        dxpu_bridge_send_tlp      a TLP from the local PCIe side
 *        dxpu_bridge_on_timer      when now >= the deadline
 *        dxpu_bridge_release       credits of consumed TLPs (unless
 *                                  auto_release)
 *   out: dxpu_bridge_next_frame    frames to put on the fabric
 *        dxpu_bridge_next_tlp      TLPs for the local PCIe side
 *        dxpu_bridge_next_event    link up/down, lost writes, timeouts
 *        dxpu_bridge_deadline      when to call dxpu_bridge_on_timer
 *
 * After every input: drain next_frame (send each), drain next_tlp, drain
 * next_event, then wait for the next frame or the deadline, whichever
 * comes first. No function calls back into the caller, blocks or sleeps.
 *
 * TIME. Every now_ns is nanoseconds since any origin the caller likes
 * (CLOCK_MONOTONIC is the natural one), the same origin for one bridge for
 * its whole life, never decreasing: a call whose now_ns is earlier than
 * one already passed fails with DXPU_E_TIME and changes nothing.
 *
 * ERRORS. Every function returns an int: 0 (DXPU_OK) or, for the polling
 * functions, 1 when they produced something; a negative DXPU_E_* code on
 * failure. Bad input never crashes the host program: NULL pointers, short
 * buffers, malformed frames or TLPs, calls out of order, unknown or freed
 * handles all return a code. dxpu_strerror names a code;
 * dxpu_bridge_last_error gives the detailed reason of a handle's latest
 * failure (which field, which frame check).
 *
 * HANDLES. A dxpu_bridge is a positive integer naming a bridge in the
 * library's table, not a pointer. Handles are never reused: after
 * dxpu_bridge_free every call with the handle, a second free included,
 * returns DXPU_E_HANDLE.
 *
 * BUFFERS. The library never keeps a pointer the caller passed: input
 * bytes are copied before the call returns, outputs are written into the
 * caller's buffers. A buffer too small for the next frame or TLP gives
 * DXPU_E_SHORT with the needed length in *len; the frame or TLP is kept and
 * returned by the next call with a buffer that holds it. A frame buffer of
 * the configured MTU (at most DXPU_MAX_FRAME) and a TLP buffer of
 * max_payload + 20 bytes (at most DXPU_MAX_TLP) never come back short.
 *
 * THREADS. Calls on one handle are serialized by the library (each handle
 * has its own lock), so a misuse from two threads cannot corrupt it; for
 * speed, drive each handle from one thread. Different handles are
 * independent and may be driven from different threads at once.
 *
 * COST. Per call: one cgo transition (tens of nanoseconds) and no memory
 * allocation on the frame and TLP paths once the bridge is built.
 *
 * KEYS (ABI version 2). dxpu_bridge_new_keyed builds a bridge of a keyed
 * pair: every frame it sends is sealed (AES-256-GCM, or integrity-only
 * GMAC) under the pair key, and every frame it takes must open under it,
 * or it is dropped (DXPU_E_FRAME, counted in struct dxpu_key_state). The
 * format and key schedule are docs/protocol.md section 11 and `go doc
 * ./bridge/seal`. Sealing adds DXPU_SEAL_OVERHEAD bytes per frame within
 * the same mtu. A new pair key is installed on both sides first
 * (dxpu_bridge_install_key), then activated on one or both
 * (dxpu_bridge_activate_key); dxpu_bridge_rekey moves to a new epoch of the
 * key now. Each move of this side's sender or of the peer's to a new key
 * is an event (DXPU_EVENT_TX_KEY, DXPU_EVENT_RX_KEY). Version 2 changes no
 * call or structure of version 1 (event.reserved is now event.generation,
 * 0 in version 1's events): a program built against version 1 runs
 * unchanged; one that needs keys checks dxpu_abi_version() >= 2.
 */
#ifndef DXPU_BRIDGE_H
#define DXPU_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DXPU_ABI_VERSION changes whenever a structure or a function of this
 * header changes or is added; dxpu_abi_version returns the library's.
 * 2: keys (dxpu_bridge_new_keyed and the key calls, key events). */
#define DXPU_ABI_VERSION 2
#define DXPU_BRIDGE_ABI_VERSION DXPU_ABI_VERSION

/* Return codes. */
#define DXPU_OK        0   /* done; polling functions: nothing to return */
#define DXPU_MORE      1   /* polling functions: one item returned */
#define DXPU_E_INVAL   -1  /* a NULL pointer or an argument out of range */
#define DXPU_E_HANDLE  -2  /* unknown or freed handle */
#define DXPU_E_SHORT   -3  /* buffer too small: *len holds the size needed */
#define DXPU_E_CONFIG  -4  /* configuration rejected (see the error text) */
#define DXPU_E_FRAME   -5  /* frame dropped: malformed, another pair or
                              version, stale or out of protocol; nothing in
                              it took effect */
#define DXPU_E_TLP     -6  /* TLP malformed or larger than max_payload */
#define DXPU_E_BUSY    -7  /* class queue or tag table full: offer the TLP
                              again after frames arrived or timers ran */
#define DXPU_E_NOTUP   -8  /* link not up yet (before the first handshake) */
#define DXPU_E_RELEASE -9  /* more credits released than TLPs delivered */
#define DXPU_E_TIME    -10 /* now_ns earlier than a time already passed */
#define DXPU_E_LIMIT   -11 /* too many bridges open (DXPU_MAX_BRIDGES) */
#define DXPU_E_INTERNAL -12 /* a bug in the library, contained; the handle
                               is unusable from then on; please report it */
#define DXPU_E_KEY     -13 /* key refused: the bridge is unkeyed, the key is
                              not DXPU_KEY_LEN bytes, or its generation is
                              not above every one held (version 2) */

/* Sizes. */
#define DXPU_MAX_FRAME  65535 /* largest MTU accepted */
#define DXPU_MAX_TLP    4116  /* 4-DW header + 4096-byte payload + digest */
#define DXPU_MAX_BRIDGES 65536
#define DXPU_NO_DEADLINE INT64_MAX

/* Roles. */
#define DXPU_ROLE_HOST 1
#define DXPU_ROLE_GPU  2

/* Flow-control classes (index of credits[], argument of release). */
#define DXPU_CLASS_POSTED     0
#define DXPU_CLASS_NONPOSTED  1
#define DXPU_CLASS_COMPLETION 2

/* Class masks for dxpu_bridge_next_tlp. */
#define DXPU_ACCEPT_POSTED     (1u << DXPU_CLASS_POSTED)
#define DXPU_ACCEPT_NONPOSTED  (1u << DXPU_CLASS_NONPOSTED)
#define DXPU_ACCEPT_COMPLETION (1u << DXPU_CLASS_COMPLETION)
#define DXPU_ACCEPT_ALL        7u

/* Link states (dxpu_bridge_state). */
#define DXPU_STATE_INIT 0  /* never up yet; HELLOs go out */
#define DXPU_STATE_UP   1
#define DXPU_STATE_DOWN 2  /* was up; new requests get UR */

/* Event kinds (struct dxpu_event.kind). */
#define DXPU_EVENT_LINK_UP            1
#define DXPU_EVENT_LINK_DOWN          2
#define DXPU_EVENT_SURPRISE_REMOVAL   3
#define DXPU_EVENT_POSTED_LOST        4
#define DXPU_EVENT_COMPLETION_TIMEOUT 5
#define DXPU_EVENT_TX_KEY             6 /* version 2: this side seals under a
                                           new key: epoch in count, key
                                           generation in generation */
#define DXPU_EVENT_RX_KEY             7 /* version 2: the peer's frames open
                                           under a new key (it moved) */

/* Keys (version 2). */
#define DXPU_KEY_LEN        32 /* pair key bytes (AES-256) */
#define DXPU_KEY_NONCE_LEN  16 /* key nonce a keyed HELLO carries */
#define DXPU_SEAL_GCM       1  /* AES-256-GCM: encryption and integrity */
#define DXPU_SEAL_GMAC      2  /* AES-256-GMAC: integrity only */
#define DXPU_SEAL_OVERHEAD  28 /* bytes a sealed frame adds */

/* One routing-ID translation: bus << 8 | device << 3 | function. */
struct dxpu_id_mapping {
	uint16_t local;
	uint16_t wire;
};

/* One class's receive buffer: TLP headers and 16-byte data units. */
struct dxpu_class_credits {
	uint32_t headers;
	uint32_t data;
};

/*
 * Bridge configuration. Zero a structure (memset or = {0}), then set role
 * and pair_id: every other zero field takes the default named beside it
 * (the defaults of bridge.Config). Durations are in nanoseconds.
 */
struct dxpu_bridge_config {
	uint32_t role;            /* DXPU_ROLE_HOST or DXPU_ROLE_GPU */
	uint32_t pair_id;         /* 1..16777215 (24 bits; 0 is no pair) */
	uint32_t mtu;             /* frame bytes from the dxpu header on: 1472 */
	uint32_t max_payload;     /* largest TLP payload (MPS): 512 */
	uint32_t window;          /* TLPs in flight, power of two: 1024 (<= 32768) */
	uint32_t tx_queue;        /* per-class queue from the local side: 256 (<= 32768) */
	struct dxpu_class_credits credits[3]; /* per class: 1024 headers and
	                             1024*max_payload/16 data units */
	uint32_t infinite_queue;  /* queue depth of an infinite class: 64 (<= 32768) */
	uint32_t tag_bits;        /* 8 or 10: 8 */
	uint32_t max_outstanding; /* forwarded requests at once: peer's tags */
	int64_t completion_timeout_ns; /* 50 ms */
	int64_t ack_delay_ns;     /* 20 us */
	int64_t initial_rto_ns;   /* 1 ms */
	int64_t min_rto_ns;       /* 100 us */
	int64_t max_rto_ns;       /* 20 ms */
	int64_t keepalive_ns;     /* 1 ms */
	int64_t dead_after_ns;    /* 10 ms */
	int64_t hello_interval_ns; /* 1 ms */
	const struct dxpu_id_mapping *id_map; /* copied; NULL when n_id_map 0 */
	uint32_t n_id_map;
	uint8_t convert_type1;    /* type 1 config for downstream_bus -> type 0 */
	uint8_t downstream_bus;
	uint16_t peer_id;         /* completer ID of synthesized completions */
	uint8_t auto_release;     /* release credits when next_tlp returns */
	uint8_t reserved[7];      /* zero */
	uint64_t seed;            /* 0: session nonces, initial sequence numbers
	                             and boot ID from a cryptographic random
	                             source, as the protocol requires; other
	                             values make them a reproducible sequence,
	                             for unkeyed simulations and tests only (a
	                             keyed bridge refuses one: DXPU_E_CONFIG) */
};

/* An event. reason is NUL-terminated, cut to fit; addrs holds the first
 * n_addrs addresses of lost memory writes (count may be larger). */
struct dxpu_event {
	uint32_t kind;         /* DXPU_EVENT_* */
	uint32_t session;      /* session nonce */
	int64_t at_ns;
	uint32_t count;        /* POSTED_LOST: TLPs lost */
	uint16_t requester_id; /* COMPLETION_TIMEOUT: the request as issued */
	uint16_t tag;
	uint32_t n_addrs;
	uint32_t generation;   /* TX_KEY, RX_KEY: the key generation (version
	                          2; reserved, 0, in version 1) */
	uint64_t addrs[8];
	char reason[96];
};

/* Statistics (bridge.Counters): totals only grow; tags_in_use, srtt_ns and
 * rto_ns are current values. */
struct dxpu_counters {
	uint64_t frames_sent, frames_received;
	uint64_t bytes_sent, bytes_received;
	uint64_t frames_dropped;
	uint64_t tlps_from_local, tlps_sent, retransmits, rtos;
	uint64_t tlps_received, tlps_delivered;
	uint64_t payload_bytes_rx, payload_bytes_tx;
	uint64_t acks_sent, naks_sent, naks_received, keepalives_sent;
	uint64_t duplicates, out_of_window, rx_overruns, bogus_credits;
	uint64_t credit_stalls[3];
	uint64_t tag_stalls, tags_in_use, tags_high_water;
	uint64_t completion_timeouts, unmatched_completions, late_completions;
	uint64_t byte_count_mismatches;
	uint64_t synthesized_ur, synthesized_ca;
	uint64_t posted_lost, completions_lost, stale_requests_dropped;
	uint64_t link_ups, link_downs;
	int64_t srtt_ns, rto_ns;
};

/*
 * The keys of a keyed pair (version 2): both sides the same. Zero the
 * structure, then set key and generation.
 */
struct dxpu_bridge_keys {
	const uint8_t *key;      /* DXPU_KEY_LEN bytes, copied */
	uint32_t generation;     /* the key's generation, >= 1 */
	uint32_t seal_mode;      /* DXPU_SEAL_GCM (0 too) or DXPU_SEAL_GMAC */
	uint64_t rekey_after;    /* frames under one key before a new epoch:
	                            2^22 */
	int64_t wall_clock_ns;   /* wall clock (ns since 1970) at now_ns 0:
	                            HELLOs are numbered by it, so that a restarted
	                            side numbers above what its peer saw; 0:
	                            now_ns alone */
	uint8_t reserved[8];     /* zero */
};

/* A keyed bridge's keys and what its seal did (dxpu_bridge_key_state). */
struct dxpu_key_state {
	uint32_t keyed;             /* 0: unkeyed, the rest is 0 */
	uint32_t active_generation; /* the generation the sender moves to */
	uint32_t newest_generation; /* the newest installed */
	uint32_t tx_generation, tx_epoch; /* this side's sending key */
	uint32_t rx_generation, rx_epoch; /* the peer's, as last opened */
	uint32_t reserved;
	uint64_t tx_frames;         /* sealed under the sending key */
	uint64_t frames_sealed, frames_opened;
	uint64_t dropped_unsealed, dropped_forged, dropped_replayed;
	uint64_t dropped_unknown_key, dropped_no_session;
	uint64_t tx_rekeys, rx_rotations;
};

typedef int64_t dxpu_bridge;

/* The library's own cgo code includes the types only: cgo declares the
 * exported functions without const, which C would take for a conflict. */
#ifndef DXPU_BRIDGE_TYPES_ONLY

/* dxpu_abi_version returns DXPU_ABI_VERSION as the library was built. */
int dxpu_abi_version(void);

/* dxpu_strerror returns a static, NUL-terminated name for a code. */
const char *dxpu_strerror(int code);

/*
 * dxpu_bridge_new builds a bridge in state INIT. On success it returns a
 * handle (> 0); on failure a negative code, and, when err is not NULL and
 * errlen > 0, the reason as a NUL-terminated string cut to errlen.
 */
dxpu_bridge dxpu_bridge_new(const struct dxpu_bridge_config *cfg, char *err, size_t errlen);

/*
 * dxpu_bridge_new_keyed builds a bridge of a keyed pair (version 2), as
 * dxpu_bridge_new does an unkeyed one; keys NULL is dxpu_bridge_new.
 */
dxpu_bridge dxpu_bridge_new_keyed(const struct dxpu_bridge_config *cfg, const struct dxpu_bridge_keys *keys, char *err, size_t errlen);

/*
 * dxpu_bridge_install_key adds pair key generation (len DXPU_KEY_LEN,
 * copied), above every generation held: frames of the peer under it open
 * at once; this side seals under it once activated, or once the peer's
 * frames show the peer did (version 2). DXPU_E_KEY: refused, the bridge
 * keeps running under its key.
 */
int dxpu_bridge_install_key(dxpu_bridge h, uint32_t generation, const uint8_t *key, size_t len);

/* dxpu_bridge_activate_key makes the newest installed generation the one
 * this side seals under from its next epoch (version 2). */
int dxpu_bridge_activate_key(dxpu_bridge h);

/* dxpu_bridge_rekey moves this side's sender to a new epoch of its key,
 * without loss, as soon as the peer holds the current one (version 2). */
int dxpu_bridge_rekey(dxpu_bridge h);

/* dxpu_bridge_key_state fills *s (an unkeyed bridge: keyed 0) (version 2). */
int dxpu_bridge_key_state(dxpu_bridge h, struct dxpu_key_state *s);

/* dxpu_bridge_free releases the bridge; the handle is dead afterwards. */
int dxpu_bridge_free(dxpu_bridge h);

/*
 * dxpu_bridge_handle_frame takes one frame from the fabric (from the dxpu
 * header on). DXPU_E_FRAME: the frame was dropped (counted in
 * frames_dropped; dxpu_bridge_last_error says why); carry on.
 */
int dxpu_bridge_handle_frame(dxpu_bridge h, int64_t now_ns, const uint8_t *frame, size_t len);

/*
 * dxpu_bridge_next_frame writes the next frame to send into buf and its
 * length into *len, and returns DXPU_MORE; DXPU_OK with *len = 0 when none
 * is due. Call until it returns DXPU_OK after every input and at every
 * deadline.
 */
int dxpu_bridge_next_frame(dxpu_bridge h, int64_t now_ns, uint8_t *buf, size_t cap, size_t *len);

/*
 * dxpu_bridge_send_tlp takes a TLP from the local PCIe side (copied).
 * DXPU_E_BUSY: offer it again later; DXPU_E_NOTUP: before the first
 * handshake. While the link is down a request is answered with UR (a
 * completion from next_tlp) and a write reported lost (an event).
 */
int dxpu_bridge_send_tlp(dxpu_bridge h, int64_t now_ns, const uint8_t *tlp, size_t len);

/*
 * dxpu_bridge_next_tlp writes the next TLP for the local PCIe side among
 * the classes in accept (DXPU_ACCEPT_*), obeying the PCIe ordering rules,
 * into buf and its length into *len, and returns DXPU_MORE; DXPU_OK with
 * *len = 0 when none waits. Unless auto_release, its credits stay in use
 * until dxpu_bridge_release.
 */
int dxpu_bridge_next_tlp(dxpu_bridge h, uint32_t accept, uint8_t *buf, size_t cap, size_t *len);

/*
 * dxpu_bridge_release returns the credits of consumed TLPs: headers TLPs
 * of class cls carrying data 16-byte data units in all (see
 * dxpu_tlp_credits). DXPU_E_RELEASE: more than was delivered.
 */
int dxpu_bridge_release(dxpu_bridge h, uint32_t cls, uint32_t headers, uint32_t data);

/* dxpu_bridge_next_event fills *ev and returns DXPU_MORE, or DXPU_OK when
 * no event is pending (*ev untouched). */
int dxpu_bridge_next_event(dxpu_bridge h, struct dxpu_event *ev);

/* dxpu_bridge_deadline stores when dxpu_bridge_on_timer must next run
 * (DXPU_NO_DEADLINE when nothing is armed). It moves after every call. */
int dxpu_bridge_deadline(dxpu_bridge h, int64_t *deadline_ns);

/* dxpu_bridge_on_timer runs the timers due at now_ns (silence detection,
 * completion and retransmission timeouts); then drain next_frame. */
int dxpu_bridge_on_timer(dxpu_bridge h, int64_t now_ns);

/* dxpu_bridge_reset tears the session down on purpose and tells the peer;
 * both sides then handshake a new session. */
int dxpu_bridge_reset(dxpu_bridge h, int64_t now_ns);

/* dxpu_bridge_state stores the link state (DXPU_STATE_*). */
int dxpu_bridge_state(dxpu_bridge h, uint32_t *state);

/* dxpu_bridge_counters fills *c with a snapshot of the statistics. */
int dxpu_bridge_counters(dxpu_bridge h, struct dxpu_counters *c);

/*
 * dxpu_bridge_last_error writes the reason of the handle's latest failed
 * call (NUL-terminated, cut to len; "" when none failed) and returns its
 * code (DXPU_OK when none). Failures found before the handle is looked up
 * (NULL pointers, lengths out of range, DXPU_E_HANDLE) are not recorded.
 */
int dxpu_bridge_last_error(dxpu_bridge h, char *buf, size_t len);

/*
 * dxpu_tlp_credits parses a TLP and stores its flow-control class and the
 * header and data credits it consumes, what dxpu_bridge_release wants
 * back. Any output pointer may be NULL. DXPU_E_TLP: it does not parse.
 */
int dxpu_tlp_credits(const uint8_t *tlp, size_t len, uint32_t *cls, uint32_t *headers, uint32_t *data);

#endif /* DXPU_BRIDGE_TYPES_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* DXPU_BRIDGE_H */
