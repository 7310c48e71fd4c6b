/*
 * badinput.c: feeds libdxpubridge bad input from C (NULL pointers, short
 * buffers, garbage frames and TLPs, calls out of order, time going back,
 * unknown and freed handles, double free) and checks that each call
 * returns the documented code and that the process survives. Two bridges
 * in this process shake hands through memory to reach the states where
 * short TLP buffers and credit releases can be tried.
 *
 * Prints one line per failed check and a closing "N passed, M failed";
 * exits 1 if any check failed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dxpu_bridge.h"

static int passed, failed;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (cond) {                                                \
			passed++;                                          \
		} else {                                                   \
			failed++;                                          \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

#define RC(call, want)                                                                     \
	do {                                                                               \
		int rc_ = (call);                                                          \
		CHECK(rc_ == (want), "%s returned %d (%s), want %d (%s)", #call, rc_,       \
		      dxpu_strerror(rc_), (want), dxpu_strerror(want));                    \
	} while (0)

static dxpu_bridge make(uint32_t role, uint32_t pair, int auto_release)
{
	struct dxpu_bridge_config cfg = {0};
	char err[256];
	cfg.role = role;
	cfg.pair_id = pair;
	cfg.auto_release = (uint8_t)auto_release;
	cfg.seed = role * 1000 + pair;
	dxpu_bridge h = dxpu_bridge_new(&cfg, err, sizeof err);
	CHECK(h > 0, "dxpu_bridge_new: %s", err);
	return h;
}

/* shuttle moves every due frame from a to b and back until neither has
 * anything to send; it returns how many frames moved. */
static int shuttle(dxpu_bridge a, dxpu_bridge b, int64_t now)
{
	static uint8_t buf[DXPU_MAX_FRAME];
	int moved = 0, again = 1;
	while (again) {
		again = 0;
		dxpu_bridge from[2] = {a, b}, to[2] = {b, a};
		for (int i = 0; i < 2; i++) {
			size_t n;
			int rc;
			while ((rc = dxpu_bridge_next_frame(from[i], now, buf, sizeof buf, &n)) == DXPU_MORE) {
				int hr = dxpu_bridge_handle_frame(to[i], now, buf, n);
				CHECK(hr == DXPU_OK, "handle_frame of a good frame: %s", dxpu_strerror(hr));
				moved++;
				again = 1;
			}
			CHECK(rc == DXPU_OK, "next_frame: %s", dxpu_strerror(rc));
		}
	}
	return moved;
}

static void test_strerror(void)
{
	for (int c = DXPU_MORE; c >= DXPU_E_INTERNAL; c--) {
		const char *s = dxpu_strerror(c);
		CHECK(s != NULL && strncmp(s, "DXPU_", 5) == 0, "dxpu_strerror(%d) = %s", c, s ? s : "NULL");
	}
	const char *u = dxpu_strerror(-1000);
	CHECK(u != NULL && strstr(u, "unknown") != NULL, "dxpu_strerror(-1000) = %s", u ? u : "NULL");
	CHECK(dxpu_strerror(12345) != NULL, "dxpu_strerror(12345) is NULL");
	CHECK(dxpu_abi_version() == DXPU_ABI_VERSION, "abi %d", dxpu_abi_version());
}

static void test_new(void)
{
	char err[256];
	struct dxpu_bridge_config cfg = {0};

	CHECK(dxpu_bridge_new(NULL, err, sizeof err) == DXPU_E_INVAL && strstr(err, "NULL"), "NULL cfg: %s", err);
	CHECK(dxpu_bridge_new(NULL, NULL, 0) == DXPU_E_INVAL, "NULL cfg, NULL err");

	cfg.role = DXPU_ROLE_HOST; /* alone at fault: pair 0 */
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG && strstr(err, "PairID 0"), "pair 0: %s", err);
	cfg.pair_id = 1;
	uint32_t roles[] = {0, 3, 256 + DXPU_ROLE_HOST, 0xffffffffu};
	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
		cfg.role = roles[i];
		dxpu_bridge h = dxpu_bridge_new(&cfg, err, sizeof err);
		CHECK(h == DXPU_E_CONFIG && strstr(err, "ole"), "role %u: %" PRId64 " %s", roles[i], h, err);
	}

	cfg.role = DXPU_ROLE_HOST;
	cfg.mtu = 100;
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG && strstr(err, "MTU"), "mtu 100: %s", err);
	cfg.mtu = 0;
	cfg.pair_id = 1u << 24;
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG && strstr(err, "PairID"), "pair 2^24: %s", err);
	cfg.pair_id = 1;
	cfg.dead_after_ns = -5;
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG, "dead_after -5: %s", err);
	cfg.dead_after_ns = 0;
	cfg.reserved[3] = 1;
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG && strstr(err, "reserved"), "reserved: %s", err);
	cfg.reserved[3] = 0;
	cfg.n_id_map = 2;
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG && strstr(err, "id_map"), "id_map NULL: %s", err);
	struct dxpu_id_mapping dup[2] = {{0x100, 0x200}, {0x100, 0x300}};
	cfg.id_map = dup;
	CHECK(dxpu_bridge_new(&cfg, err, sizeof err) == DXPU_E_CONFIG && strstr(err, "IDMap"), "id_map dup: %s", err);
	cfg.id_map = NULL;
	cfg.n_id_map = 0;

	/* A short error buffer is cut, never overrun. */
	char small[9];
	memset(small, 'x', sizeof small);
	cfg.mtu = 100;
	CHECK(dxpu_bridge_new(&cfg, small, 4) == DXPU_E_CONFIG && strlen(small) == 3 && small[4] == 'x',
	      "errlen 4: %.9s", small);
	CHECK(dxpu_bridge_new(&cfg, small, 0) == DXPU_E_CONFIG && small[0] != 0, "errlen 0 wrote");
	cfg.mtu = 0;

	/* Handles are not reused; new/free in a loop leaks nothing visible. */
	dxpu_bridge prev = 0;
	for (int i = 0; i < 200; i++) {
		dxpu_bridge h = dxpu_bridge_new(&cfg, err, sizeof err);
		CHECK(h > prev, "handle %" PRId64 " after %" PRId64, h, prev);
		prev = h;
		RC(dxpu_bridge_free(h), DXPU_OK);
	}
}

static void test_unknown_handles(void)
{
	dxpu_bridge bad[] = {0, -1, INT64_MAX, 987654321};
	uint8_t buf[64] = {0};
	size_t n = 7;
	int64_t d;
	uint32_t s;
	struct dxpu_event ev;
	struct dxpu_counters c;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		dxpu_bridge h = bad[i];
		RC(dxpu_bridge_free(h), DXPU_E_HANDLE);
		RC(dxpu_bridge_handle_frame(h, 1, buf, sizeof buf), DXPU_E_HANDLE);
		RC(dxpu_bridge_next_frame(h, 1, buf, sizeof buf, &n), DXPU_E_HANDLE);
		RC(dxpu_bridge_send_tlp(h, 1, buf, 16), DXPU_E_HANDLE);
		RC(dxpu_bridge_next_tlp(h, DXPU_ACCEPT_ALL, buf, sizeof buf, &n), DXPU_E_HANDLE);
		RC(dxpu_bridge_release(h, 0, 1, 0), DXPU_E_HANDLE);
		RC(dxpu_bridge_next_event(h, &ev), DXPU_E_HANDLE);
		RC(dxpu_bridge_deadline(h, &d), DXPU_E_HANDLE);
		RC(dxpu_bridge_on_timer(h, 1), DXPU_E_HANDLE);
		RC(dxpu_bridge_reset(h, 1), DXPU_E_HANDLE);
		RC(dxpu_bridge_state(h, &s), DXPU_E_HANDLE);
		RC(dxpu_bridge_counters(h, &c), DXPU_E_HANDLE);
		RC(dxpu_bridge_last_error(h, (char *)buf, sizeof buf), DXPU_E_HANDLE);
	}
}

static void test_one_bridge(void)
{
	dxpu_bridge h = make(DXPU_ROLE_HOST, 1, 1);
	uint8_t buf[DXPU_MAX_FRAME];
	char why[256];
	size_t n = 99;
	uint32_t s = 99;
	int64_t d = 0;

	/* NULL pointers. */
	RC(dxpu_bridge_handle_frame(h, 10, NULL, 40), DXPU_E_INVAL);
	RC(dxpu_bridge_send_tlp(h, 10, NULL, 16), DXPU_E_INVAL);
	RC(dxpu_bridge_next_frame(h, 10, buf, sizeof buf, NULL), DXPU_E_INVAL);
	RC(dxpu_bridge_next_tlp(h, DXPU_ACCEPT_ALL, buf, sizeof buf, NULL), DXPU_E_INVAL);
	RC(dxpu_bridge_next_event(h, NULL), DXPU_E_INVAL);
	RC(dxpu_bridge_deadline(h, NULL), DXPU_E_INVAL);
	RC(dxpu_bridge_state(h, NULL), DXPU_E_INVAL);
	RC(dxpu_bridge_counters(h, NULL), DXPU_E_INVAL);
	RC(dxpu_tlp_credits(NULL, 16, NULL, NULL, NULL), DXPU_E_INVAL);
	RC(dxpu_bridge_last_error(h, NULL, 0), DXPU_OK);

	/* A length far beyond any frame is refused, not read. */
	RC(dxpu_bridge_handle_frame(h, 10, buf, SIZE_MAX), DXPU_E_INVAL);
	RC(dxpu_bridge_send_tlp(h, 10, buf, SIZE_MAX), DXPU_E_INVAL);

	/* Out of order: a TLP before the link is up; nothing to deliver. */
	RC(dxpu_bridge_state(h, &s), DXPU_OK);
	CHECK(s == DXPU_STATE_INIT, "state %u", s);
	uint8_t mwr[20] = {0x40, 0, 0, 1, 0x01, 0, 0, 0x0f, 0x10, 0, 0, 0, 1, 2, 3, 4};
	RC(dxpu_bridge_send_tlp(h, 10, mwr, 16), DXPU_E_NOTUP);
	RC(dxpu_bridge_next_tlp(h, DXPU_ACCEPT_ALL, buf, sizeof buf, &n), DXPU_OK);
	CHECK(n == 0, "next_tlp with nothing: len %zu", n);
	RC(dxpu_bridge_next_tlp(h, 8, buf, sizeof buf, &n), DXPU_E_INVAL);
	RC(dxpu_bridge_release(h, 3, 1, 0), DXPU_E_INVAL);
	RC(dxpu_bridge_release(h, DXPU_CLASS_POSTED, 1, 0), DXPU_E_RELEASE);
	RC(dxpu_bridge_release(h, DXPU_CLASS_POSTED, 0xffffffffu, 0xffffffffu), DXPU_E_RELEASE);

	/* Garbage TLPs. */
	uint8_t junk[16];
	memset(junk, 0xff, sizeof junk);
	RC(dxpu_bridge_send_tlp(h, 10, junk, sizeof junk), DXPU_E_TLP);
	RC(dxpu_bridge_send_tlp(h, 10, mwr, 3), DXPU_E_TLP);
	RC(dxpu_bridge_send_tlp(h, 10, mwr, 0), DXPU_E_TLP);
	RC(dxpu_tlp_credits(junk, sizeof junk, NULL, NULL, NULL), DXPU_E_TLP);
	uint32_t cls = 9, hd = 9, dc = 9;
	RC(dxpu_tlp_credits(mwr, 16, &cls, &hd, &dc), DXPU_OK);
	CHECK(cls == DXPU_CLASS_POSTED && hd == 1 && dc == 1, "credits of a 4-byte MWr: %u %u %u", cls, hd, dc);
	RC(dxpu_tlp_credits(mwr, 16, NULL, NULL, NULL), DXPU_OK);

	/* Garbage frames: dropped with a reason, counted. */
	struct dxpu_counters c;
	RC(dxpu_bridge_handle_frame(h, 10, junk, sizeof junk), DXPU_E_FRAME);
	RC(dxpu_bridge_last_error(h, why, sizeof why), DXPU_E_FRAME);
	CHECK(strlen(why) > 0, "no reason for a dropped frame");
	RC(dxpu_bridge_handle_frame(h, 10, junk, 0), DXPU_E_FRAME);
	memset(buf, 0x17, 4096);
	RC(dxpu_bridge_handle_frame(h, 10, buf, 4096), DXPU_E_FRAME);
	srand(7);
	for (int i = 0; i < 2000; i++) {
		size_t len = (size_t)(rand() % 200);
		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rand();
		if (len > 0)
			buf[0] = 0x17; /* version 1 and flags, to get past the first check */
		int rc = dxpu_bridge_handle_frame(h, 10 + i, buf, len);
		CHECK(rc == DXPU_E_FRAME || rc == DXPU_OK, "random frame %d: %s", i, dxpu_strerror(rc));
	}
	RC(dxpu_bridge_counters(h, &c), DXPU_OK);
	CHECK(c.frames_dropped >= 4, "frames_dropped %" PRIu64, c.frames_dropped);

	/* Time going back is refused and changes nothing. */
	RC(dxpu_bridge_on_timer(h, 5000), DXPU_OK);
	RC(dxpu_bridge_on_timer(h, 4999), DXPU_E_TIME);
	RC(dxpu_bridge_next_frame(h, 4000, buf, sizeof buf, &n), DXPU_E_TIME);
	RC(dxpu_bridge_handle_frame(h, 1, junk, sizeof junk), DXPU_E_TIME);
	RC(dxpu_bridge_last_error(h, why, sizeof why), DXPU_E_TIME);
	CHECK(strstr(why, "before") != NULL, "time error says %s", why);

	/* Short frame buffers: the length needed, then the same frame. */
	RC(dxpu_bridge_next_frame(h, 5000, NULL, 0, &n), DXPU_E_SHORT);
	size_t need = n;
	CHECK(need > 0 && need < 1472, "needed %zu", need);
	RC(dxpu_bridge_next_frame(h, 5000, buf, need - 1, &n), DXPU_E_SHORT);
	CHECK(n == need, "needed %zu then %zu", need, n);
	RC(dxpu_bridge_next_frame(h, 5000, buf, need, &n), DXPU_MORE);
	CHECK(n == need && buf[0] >> 4 == 1, "got %zu bytes, version %d", n, buf[0] >> 4);
	RC(dxpu_bridge_deadline(h, &d), DXPU_OK);
	CHECK(d > 5000 && d != DXPU_NO_DEADLINE, "deadline %" PRId64, d);

	struct dxpu_event ev;
	RC(dxpu_bridge_next_event(h, &ev), DXPU_OK);

	/* Free, then every call is DXPU_E_HANDLE, a second free too. */
	RC(dxpu_bridge_free(h), DXPU_OK);
	RC(dxpu_bridge_free(h), DXPU_E_HANDLE);
	RC(dxpu_bridge_on_timer(h, 6000), DXPU_E_HANDLE);
	RC(dxpu_bridge_next_frame(h, 6000, buf, sizeof buf, &n), DXPU_E_HANDLE);
	RC(dxpu_bridge_last_error(h, why, sizeof why), DXPU_E_HANDLE);
}

static void test_pair(void)
{
	dxpu_bridge host = make(DXPU_ROLE_HOST, 5, 1);
	dxpu_bridge gpu = make(DXPU_ROLE_GPU, 5, 0);
	dxpu_bridge other = make(DXPU_ROLE_GPU, 6, 0);
	int64_t now = 1000;
	uint8_t buf[DXPU_MAX_FRAME];
	size_t n;
	uint32_t s;

	/* A frame of another pair is dropped. */
	RC(dxpu_bridge_next_frame(other, now, buf, sizeof buf, &n), DXPU_MORE);
	RC(dxpu_bridge_handle_frame(host, now, buf, n), DXPU_E_FRAME);

	for (int i = 0; i < 10; i++, now += 1000)
		shuttle(host, gpu, now);
	RC(dxpu_bridge_state(host, &s), DXPU_OK);
	CHECK(s == DXPU_STATE_UP, "host state %u", s);
	RC(dxpu_bridge_state(gpu, &s), DXPU_OK);
	CHECK(s == DXPU_STATE_UP, "gpu state %u", s);
	struct dxpu_event ev;
	RC(dxpu_bridge_next_event(host, &ev), DXPU_MORE);
	CHECK(ev.kind == DXPU_EVENT_LINK_UP && ev.reason[sizeof ev.reason - 1] == 0, "event %u", ev.kind);

	/* A 64-byte write reaches the GPU side; a short buffer gets its
	 * length, a mask without its class nothing, then the same bytes. */
	uint8_t mwr[16 + 64] = {0x60, 0, 0, 16, 0x01, 0, 0, 0xff, 0, 0, 0, 1, 0, 0, 0x10, 0};
	for (int i = 0; i < 64; i++)
		mwr[16 + i] = (uint8_t)(i * 7);
	RC(dxpu_bridge_send_tlp(host, now, mwr, sizeof mwr), DXPU_OK);
	shuttle(host, gpu, now);
	RC(dxpu_bridge_next_tlp(gpu, DXPU_ACCEPT_ALL, buf, 4, &n), DXPU_E_SHORT);
	CHECK(n == sizeof mwr, "needed %zu", n);
	RC(dxpu_bridge_next_tlp(gpu, DXPU_ACCEPT_ALL, NULL, 0, &n), DXPU_E_SHORT);
	RC(dxpu_bridge_next_tlp(gpu, DXPU_ACCEPT_NONPOSTED, buf, sizeof buf, &n), DXPU_OK);
	CHECK(n == 0, "a non-posted mask got %zu bytes", n);
	RC(dxpu_bridge_next_tlp(gpu, DXPU_ACCEPT_ALL, buf, sizeof buf, &n), DXPU_MORE);
	CHECK(n == sizeof mwr && memcmp(buf, mwr, n) == 0, "delivered %zu bytes, differ: %d", n, memcmp(buf, mwr, n));
	RC(dxpu_bridge_next_tlp(gpu, DXPU_ACCEPT_ALL, buf, sizeof buf, &n), DXPU_OK);

	/* Manual release: what dxpu_tlp_credits says, once. */
	uint32_t cls, hd, dc;
	RC(dxpu_tlp_credits(mwr, sizeof mwr, &cls, &hd, &dc), DXPU_OK);
	CHECK(cls == DXPU_CLASS_POSTED && hd == 1 && dc == 4, "credits %u %u %u", cls, hd, dc);
	RC(dxpu_bridge_release(gpu, cls, hd, dc + 1), DXPU_E_RELEASE);
	RC(dxpu_bridge_release(gpu, cls, hd, dc), DXPU_OK);
	RC(dxpu_bridge_release(gpu, cls, hd, dc), DXPU_E_RELEASE);

	/* A TLP larger than max_payload is refused. */
	static uint8_t big[16 + 1024];
	memcpy(big, mwr, 16);
	big[3] = 0; /* 256 DW = 1024 bytes */
	big[2] = 1;
	RC(dxpu_bridge_send_tlp(host, now, big, sizeof big), DXPU_E_TLP);

	/* Reset: both sides see the link go down and come back. */
	RC(dxpu_bridge_reset(host, now), DXPU_OK);
	for (int i = 0; i < 10; i++, now += 1000)
		shuttle(host, gpu, now);
	struct dxpu_counters c;
	RC(dxpu_bridge_counters(host, &c), DXPU_OK);
	CHECK(c.link_downs == 1 && c.link_ups == 2, "host link downs %" PRIu64 " ups %" PRIu64, c.link_downs, c.link_ups);
	RC(dxpu_bridge_free(host), DXPU_OK);
	RC(dxpu_bridge_free(gpu), DXPU_OK);
	RC(dxpu_bridge_free(other), DXPU_OK);
}

int main(void)
{
	test_strerror();
	test_new();
	test_unknown_handles();
	test_one_bridge();
	test_pair();
	printf("badinput: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
