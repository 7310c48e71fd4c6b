/*
 * pair.c: the host side of a dxpu bridge pair in C, over UDP, driving the
 * bridge core through libdxpubridge (include/dxpu_bridge.h). It writes a
 * pattern into the device's memory with MWr TLPs, flushes with a read,
 * reads it all back with MRd TLPs and compares byte for byte.
 *
 *   pair --peer 127.0.0.1:PORT [--local 127.0.0.1:0] [--bytes 67108864]
 *        [--base 0x100000000] [--pair 1] [--stall-ms 10000]
 *        [--completion-timeout-ms 1000] [--dead-after-ms 1000]
 *        [--key-hex 64HEX [--key-generation 1] [--seal-mode gcm|gmac]]
 *
 * With --key-hex the pair is keyed (ABI version 2): every frame is sealed
 * under that pair key, the same as the peer's, and between the writes and
 * the reads the program moves to a new key epoch (dxpu_bridge_rekey); the
 * final line then counts the key events and sealed frames.
 *
 * The peer is a GPU-side bridge with memory behind it at [base,
 * base+bytes), e.g. the Go test's driver.Runner with a
 * nettlpside.MemoryDevice. The program prints one JSON line with the
 * address it bound ({"listening":"IP:PORT"}) and, at the end, one with its
 * figures; it exits 0 only if every byte read back matched. It gives up
 * (exit 2) when nothing arrives from the peer for --stall-ms. With 256
 * reads of 4 KiB in flight, a loaded machine can take longer than PCIe's
 * usual 50 ms to complete the last of them, hence the longer default
 * completion timeout.
 *
 * The data pattern: byte i of the region (offset from base) is byte i%8 of
 * mix(i/8), mix being the splitmix64 finalizer (see pattern_byte).
 *
 * Linux only (recvmmsg, sendmmsg, ppoll). One thread: poll the socket
 * until a frame arrives or the bridge's deadline passes, feed frames in,
 * drain frames out (sendmmsg), TLPs in, events; offer new TLPs until the
 * bridge says DXPU_E_BUSY.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dxpu_bridge.h"

#define WRITE_SIZE 512   /* MWr payload: the bridge's default max_payload */
#define READ_SIZE 4096   /* MRd length: 1024 DW, never crossing 4 KiB */
#define NTAGS 256        /* 8-bit tags */
#define BATCH 32         /* frames per sendmmsg / recvmmsg */
#define REQUESTER 0x0100 /* 01:00.0 */

static int fd = -1;
static dxpu_bridge br;
static int link_up;
static int64_t last_rx_ns;
static int64_t stall_ns = 10LL * 1000000000;
static int64_t cpl_timeout_ns = 1000LL * 1000000;
/* dxpu bridge's --dead-after: the daemon, keeping alive every 50 ms,
 * would seem dead to the library's default of 10 ms. */
static int64_t dead_after_ns = 1000LL * 1000000;

/* Outstanding reads by tag. */
struct read {
	int busy;
	uint64_t addr; /* offset from base */
	uint32_t len;
	uint32_t got;
};
static struct read reads[NTAGS];
static int free_tags[NTAGS], nfree;

static uint8_t *got_buf;   /* what came back */
static uint64_t region;    /* bytes */
static uint64_t base_addr; /* device address of the region */
static int flush_done, bad_status;
static uint64_t cpls, reads_done;
static uint64_t tx_keys, rx_keys; /* key events (keyed pairs) */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint8_t pattern_byte(uint64_t i)
{
	uint64_t x = (i >> 3) + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (uint8_t)(x >> ((i & 7) * 8));
}

static void die(const char *what, int rc)
{
	char why[256] = "";
	dxpu_bridge_last_error(br, why, sizeof why);
	fprintf(stderr, "pair: %s: %s (%s)\n", what, dxpu_strerror(rc), why);
	printf("{\"side\":\"c\",\"ok\":false,\"error\":\"%s: %s\"}\n", what, dxpu_strerror(rc));
	exit(1);
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* mwr builds a 4-DW memory write of n bytes (a multiple of 4) at addr. */
static size_t mwr(uint8_t *t, uint64_t addr, const uint8_t *data, uint32_t n)
{
	uint32_t dw = n / 4;
	memset(t, 0, 16);
	t[0] = 0x60;
	t[2] = (uint8_t)((dw >> 8) & 3);
	t[3] = (uint8_t)dw;
	put_be(t + 4, REQUESTER, 2);
	t[7] = dw == 1 ? 0x0f : 0xff;
	put_be(t + 8, addr, 8);
	memcpy(t + 16, data, n);
	return 16 + n;
}

/* mrd builds a 4-DW memory read of n bytes (a multiple of 4) at addr. */
static size_t mrd(uint8_t *t, uint64_t addr, uint32_t n, int tag)
{
	uint32_t dw = n / 4;
	memset(t, 0, 16);
	t[0] = 0x20;
	t[2] = (uint8_t)((dw >> 8) & 3); /* 1024 DW encodes as 0 */
	t[3] = (uint8_t)dw;
	put_be(t + 4, REQUESTER, 2);
	t[6] = (uint8_t)tag;
	t[7] = dw == 1 ? 0x0f : 0xff;
	put_be(t + 8, addr, 8);
	return 16;
}

/* completion takes a TLP from the bridge: a CplD for one of our reads. */
static void completion(const uint8_t *t, size_t n)
{
	if (n < 12 || (t[0] & 0x1f) != 0x0a) {
		fprintf(stderr, "pair: unexpected TLP type %#x (%zu bytes)\n", t[0], n);
		bad_status++;
		return;
	}
	cpls++;
	int status = t[6] >> 5;
	uint32_t bc = ((uint32_t)(t[6] & 0x0f) << 8) | t[7];
	int tag = t[10] | ((t[1] >> 3) & 1) << 8 | ((t[1] >> 7) & 1) << 9;
	if (tag >= NTAGS || !reads[tag].busy) {
		fprintf(stderr, "pair: completion for idle tag %d\n", tag);
		bad_status++;
		return;
	}
	struct read *r = &reads[tag];
	if (status != 0 || !(t[0] & 0x40)) {
		fprintf(stderr, "pair: read at %#" PRIx64 " completed with status %d\n", r->addr, status);
		bad_status++;
		r->got = r->len;
	} else {
		uint32_t dw = ((uint32_t)(t[2] & 3) << 8) | t[3];
		if (dw == 0)
			dw = 1024;
		if (bc == 0)
			bc = 4096;
		uint32_t la = t[11] & 0x7f;
		uint32_t off = r->len - bc; /* Byte Count: bytes still owed */
		uint32_t k = dw * 4 - (la & 3);
		if (k > bc)
			k = bc;
		if (bc > r->len || 12 + (la & 3) + k > n) {
			fprintf(stderr, "pair: completion with byte count %u for a %u-byte read\n", bc, r->len);
			bad_status++;
			r->got = r->len;
		} else {
			if (r->addr != UINT64_MAX)
				memcpy(got_buf + r->addr + off, t + 12 + (la & 3), k);
			r->got += k;
		}
	}
	if (r->got >= r->len) {
		if (r->addr == UINT64_MAX)
			flush_done = 1;
		else
			reads_done++;
		r->busy = 0;
		free_tags[nfree++] = tag;
	}
}

/* send_due sends every frame the bridge has due, BATCH per sendmmsg. */
static void send_due(int64_t now)
{
	static uint8_t tx[BATCH][2048];
	static struct mmsghdr msgs[BATCH];
	static struct iovec iov[BATCH];
	int rc;
	for (;;) {
		int n = 0;
		size_t len;
		while (n < BATCH && (rc = dxpu_bridge_next_frame(br, now, tx[n], sizeof tx[n], &len)) == DXPU_MORE) {
			iov[n] = (struct iovec){tx[n], len};
			msgs[n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[n], .msg_iovlen = 1}};
			n++;
		}
		if (rc < 0)
			die("next_frame", rc);
		for (int sent = 0; sent < n;) {
			int k = sendmmsg(fd, msgs + sent, n - sent, 0);
			if (k < 0) {
				if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS || errno == ECONNREFUSED)
					break; /* the bridge retransmits what is lost */
				perror("sendmmsg");
				exit(1);
			}
			sent += k;
		}
		if (n < BATCH)
			return;
	}
}

/*
 * pump runs the bridge once: send what the TLPs offered since the last
 * pump made due, wait up to wait_ns for a frame (never past the bridge's
 * deadline), feed what arrived, run timers, send what is due, and take
 * TLPs and events.
 */
static void pump(int64_t wait_ns)
{
	static uint8_t rx[BATCH][2048], tlp[DXPU_MAX_TLP];
	static struct mmsghdr msgs[BATCH];
	static struct iovec iov[BATCH];
	int64_t now = mono_ns(), deadline;
	int rc;

	send_due(now);
	if ((rc = dxpu_bridge_deadline(br, &deadline)) != DXPU_OK)
		die("deadline", rc);
	if (deadline - now < wait_ns)
		wait_ns = deadline - now;
	if (wait_ns > 0) {
		struct timespec ts = {wait_ns / 1000000000, wait_ns % 1000000000};
		struct pollfd p = {fd, POLLIN, 0};
		if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR) {
			perror("ppoll");
			exit(1);
		}
	}
	for (int i = 0; i < BATCH; i++) {
		iov[i] = (struct iovec){rx[i], sizeof rx[i]};
		msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
	}
	int got = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
	now = mono_ns();
	if (got > 0)
		last_rx_ns = now;
	for (int i = 0; i < got; i++) {
		rc = dxpu_bridge_handle_frame(br, now, rx[i], msgs[i].msg_len);
		if (rc != DXPU_OK && rc != DXPU_E_FRAME)
			die("handle_frame", rc);
	}
	if (now - last_rx_ns > stall_ns) {
		fprintf(stderr, "pair: nothing from the peer for %" PRId64 " ms\n", stall_ns / 1000000);
		printf("{\"side\":\"c\",\"ok\":false,\"error\":\"stalled\"}\n");
		exit(2);
	}
	if ((rc = dxpu_bridge_on_timer(br, now)) != DXPU_OK)
		die("on_timer", rc);
	send_due(now);
	size_t len;
	while ((rc = dxpu_bridge_next_tlp(br, DXPU_ACCEPT_ALL, tlp, sizeof tlp, &len)) == DXPU_MORE)
		completion(tlp, len);
	if (rc < 0)
		die("next_tlp", rc);
	struct dxpu_event ev;
	while ((rc = dxpu_bridge_next_event(br, &ev)) == DXPU_MORE) {
		if (ev.kind == DXPU_EVENT_LINK_UP)
			link_up = 1;
		else if (ev.kind == DXPU_EVENT_TX_KEY)
			tx_keys++;
		else if (ev.kind == DXPU_EVENT_RX_KEY)
			rx_keys++;
		else {
			fprintf(stderr, "pair: event %u: %s\n", ev.kind, ev.reason);
			printf("{\"side\":\"c\",\"ok\":false,\"error\":\"event %u\"}\n", ev.kind);
			exit(1);
		}
	}
	if (rc < 0)
		die("next_event", rc);
}

/* offer hands t to the bridge: 1 taken, 0 busy (pump and offer again). */
static int offer(const uint8_t *t, size_t n)
{
	int rc = dxpu_bridge_send_tlp(br, mono_ns(), t, n);
	if (rc == DXPU_OK)
		return 1;
	if (rc == DXPU_E_BUSY)
		return 0;
	die("send_tlp", rc);
	return 0;
}

static int take_tag(void) { return nfree > 0 ? free_tags[--nfree] : -1; }

static void start_read(int tag, uint64_t off, uint32_t len)
{
	reads[tag] = (struct read){1, off, len, 0};
}

/* flush reads 4 bytes: its completion comes after every earlier write. */
static void flush(void)
{
	uint8_t t[16];
	int tag;
	while ((tag = take_tag()) < 0)
		pump(1000000);
	mrd(t, base_addr, 4, tag);
	start_read(tag, UINT64_MAX, 4);
	while (!offer(t, 16))
		pump(1000000);
	flush_done = 0;
	while (!flush_done)
		pump(1000000);
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || colon - s >= (long)sizeof host)
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *peer = NULL, *local = "127.0.0.1:0";
	uint64_t pair_id = 1, key_gen = 1;
	const char *key_hex = NULL, *seal_mode = "gcm";
	region = 64 << 20;
	base_addr = 0x100000000ull;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--peer"))
			peer = argv[i + 1];
		else if (!strcmp(argv[i], "--local"))
			local = argv[i + 1];
		else if (!strcmp(argv[i], "--bytes"))
			region = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--base"))
			base_addr = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--pair"))
			pair_id = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--stall-ms"))
			stall_ns = (int64_t)strtoll(argv[i + 1], NULL, 0) * 1000000;
		else if (!strcmp(argv[i], "--completion-timeout-ms"))
			cpl_timeout_ns = (int64_t)strtoll(argv[i + 1], NULL, 0) * 1000000;
		else if (!strcmp(argv[i], "--dead-after-ms"))
			dead_after_ns = (int64_t)strtoll(argv[i + 1], NULL, 0) * 1000000;
		else if (!strcmp(argv[i], "--key-hex"))
			key_hex = argv[i + 1];
		else if (!strcmp(argv[i], "--key-generation"))
			key_gen = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--seal-mode"))
			seal_mode = argv[i + 1];
		else {
			fprintf(stderr, "pair: unknown flag %s\n", argv[i]);
			return 64;
		}
	}
	if (!peer || region == 0 || region % READ_SIZE || base_addr % READ_SIZE) {
		fprintf(stderr, "usage: pair --peer IP:PORT [--local IP:PORT] [--bytes N (multiple of %d)] [--base ADDR] [--pair ID] [--stall-ms MS] [--completion-timeout-ms MS] [--dead-after-ms MS] [--key-hex 64HEX [--key-generation N] [--seal-mode gcm|gmac]]\n", READ_SIZE);
		return 64;
	}
	uint8_t key[DXPU_KEY_LEN];
	struct dxpu_bridge_keys keys = {0};
	if (key_hex) {
		for (int i = 0; i < DXPU_KEY_LEN; i++) {
			unsigned v;
			if (strlen(key_hex) != 2 * DXPU_KEY_LEN || sscanf(key_hex + 2 * i, "%2x", &v) != 1) {
				fprintf(stderr, "pair: --key-hex: want %d hex digits\n", 2 * DXPU_KEY_LEN);
				return 64;
			}
			key[i] = (uint8_t)v;
		}
		keys.key = key;
		keys.generation = (uint32_t)key_gen;
		if (!strcmp(seal_mode, "gmac"))
			keys.seal_mode = DXPU_SEAL_GMAC;
		else if (!strcmp(seal_mode, "gcm"))
			keys.seal_mode = DXPU_SEAL_GCM;
		else {
			fprintf(stderr, "pair: --seal-mode %s: want gcm or gmac\n", seal_mode);
			return 64;
		}
		/* HELLOs are numbered by the wall clock: its value at now_ns 0. */
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		keys.wall_clock_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - mono_ns();
	}
	if (dxpu_abi_version() < DXPU_ABI_VERSION) {
		fprintf(stderr, "pair: library ABI %d, header %d\n", dxpu_abi_version(), DXPU_ABI_VERSION);
		return 1;
	}

	struct sockaddr_in la, pa;
	if (parse_addr(local, &la) || parse_addr(peer, &pa)) {
		fprintf(stderr, "pair: bad address %s or %s\n", local, peer);
		return 64;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	int bufsz = 8 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
	socklen_t sl = sizeof la;
	if (fd < 0 || bind(fd, (struct sockaddr *)&la, sizeof la) || getsockname(fd, (struct sockaddr *)&la, &sl) ||
	    connect(fd, (struct sockaddr *)&pa, sizeof pa)) {
		perror("pair: socket");
		return 1;
	}
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &la.sin_addr, ip, sizeof ip);
	printf("{\"listening\":\"%s:%u\"}\n", ip, ntohs(la.sin_port));
	fflush(stdout);

	struct dxpu_bridge_config cfg = {0};
	cfg.role = DXPU_ROLE_HOST;
	cfg.pair_id = (uint32_t)pair_id;
	cfg.auto_release = 1;
	cfg.completion_timeout_ns = cpl_timeout_ns;
	cfg.keepalive_ns = 50LL * 1000000; /* dxpu bridge's --keepalive */
	cfg.dead_after_ns = dead_after_ns;
	char err[256];
	br = key_hex ? dxpu_bridge_new_keyed(&cfg, &keys, err, sizeof err) : dxpu_bridge_new(&cfg, err, sizeof err);
	if (br < 0) {
		fprintf(stderr, "pair: dxpu_bridge_new: %s: %s\n", dxpu_strerror((int)br), err);
		return 1;
	}

	uint8_t *src = malloc(region);
	got_buf = calloc(1, region);
	if (!src || !got_buf) {
		fprintf(stderr, "pair: no memory for 2 x %" PRIu64 " bytes\n", region);
		return 1;
	}
	for (uint64_t i = 0; i < region; i++)
		src[i] = pattern_byte(i);
	for (int i = 0; i < NTAGS; i++)
		free_tags[nfree++] = NTAGS - 1 - i;

	last_rx_ns = mono_ns();
	while (!link_up)
		pump(1000000);

	/* Writes, then a flushing read: the time until it completes. */
	uint8_t t[16 + WRITE_SIZE];
	int rc0;
	int64_t t0 = mono_ns();
	for (uint64_t off = 0; off < region;) {
		size_t n = mwr(t, base_addr + off, src + off, WRITE_SIZE);
		while (off < region && offer(t, n)) {
			off += WRITE_SIZE;
			if (off < region)
				n = mwr(t, base_addr + off, src + off, WRITE_SIZE);
		}
		pump(off < region ? 1000000 : 0);
	}
	flush();
	int64_t t1 = mono_ns();
	/* A keyed pair reads under a new key epoch: rekeying loses nothing. */
	if (key_hex && (rc0 = dxpu_bridge_rekey(br)) != DXPU_OK)
		die("rekey", rc0);

	/* Reads of READ_SIZE, up to NTAGS outstanding. */
	uint64_t next = 0, want = region / READ_SIZE;
	while (reads_done < want) {
		int tag;
		while (next < region && (tag = take_tag()) >= 0) {
			mrd(t, base_addr + next, READ_SIZE, tag);
			if (!offer(t, 16)) {
				free_tags[nfree++] = tag;
				break;
			}
			start_read(tag, next, READ_SIZE);
			next += READ_SIZE;
		}
		pump(1000000);
		if (bad_status)
			break;
	}
	int64_t t2 = mono_ns();

	uint64_t mismatches = 0, first = UINT64_MAX;
	for (uint64_t i = 0; i < region; i++)
		if (got_buf[i] != src[i] && mismatches++ == 0)
			first = i;
	struct dxpu_counters c;
	int rc = dxpu_bridge_counters(br, &c);
	if (rc != DXPU_OK)
		die("counters", rc);
	struct dxpu_key_state ks;
	if ((rc = dxpu_bridge_key_state(br, &ks)) != DXPU_OK)
		die("key_state", rc);
	double ws = (t1 - t0) / 1e9, rs = (t2 - t1) / 1e9;
	int ok = mismatches == 0 && bad_status == 0;
	printf("{\"side\":\"c\",\"ok\":%s,\"bytes\":%" PRIu64 ",\"write_s\":%.6f,\"write_gbps\":%.3f,"
	       "\"read_s\":%.6f,\"read_gbps\":%.3f,\"mismatches\":%" PRIu64 ",\"first_mismatch\":%" PRId64 ","
	       "\"bad_completions\":%d,\"completions\":%" PRIu64 ",\"frames_sent\":%" PRIu64 ",\"frames_received\":%" PRIu64
	       ",\"retransmits\":%" PRIu64 ",\"frames_dropped\":%" PRIu64 ",\"keyed\":%s,\"frames_sealed\":%" PRIu64
	       ",\"frames_opened\":%" PRIu64 ",\"tx_key_events\":%" PRIu64 ",\"rx_key_events\":%" PRIu64 ",\"tx_epoch\":%u}\n",
	       ok ? "true" : "false", region, ws, region * 8 / ws / 1e9, rs, region * 8 / rs / 1e9, mismatches,
	       first == UINT64_MAX ? (int64_t)-1 : (int64_t)first, bad_status, cpls, c.frames_sent, c.frames_received,
	       c.retransmits, c.frames_dropped, ks.keyed ? "true" : "false", ks.frames_sealed, ks.frames_opened, tx_keys,
	       rx_keys, ks.tx_epoch);
	if ((rc = dxpu_bridge_free(br)) != DXPU_OK)
		die("free", rc);
	free(src);
	free(got_buf);
	close(fd);
	return ok ? 0 : 1;
}
