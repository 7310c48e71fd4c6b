// A host-side model around the Verilated GPU-side bridge: it drives the
// MAC streams with whole Ethernet frames (raw dxpu or UDP/IPv4, tagged or
// not), plays the host end of the protocol (handshake, Ack, credits) as
// each test asks, and stands a memory target behind the PCIe side (the
// device answering the requests the bridge forwards on CQ with CplDs on
// CC). Time is simulated: tick_us pulses every US cycles.
#pragma once
#include "Vdxpu_bridge_gpu.h"
#include "tb.h"
#include "verilated.h"
#include <deque>
#include <map>
#include <memory>

namespace bench {

using bytes = std::vector<uint8_t>;

constexpr uint32_t PAIR = 42;
constexpr uint64_t BRIDGE_MAC = 0x020000000002, HOST_MAC = 0x020000000001;
constexpr uint32_t BRIDGE_IP = 0xc0a80a03, HOST_IP = 0xc0a80a01;
constexpr uint16_t PORT = 8855;
constexpr int US = 50; // cycles per simulated microsecond
enum { MSG_TLP = 1, MSG_ACK, MSG_NAK, MSG_CREDIT, MSG_CONTROL };
enum { HELLO = 1, HELLO_ACK, KEEPALIVE, KEEPALIVE_ACK, RESET };
enum { F_ACK = 1, F_CREDIT = 2, F_SACK = 4, F_SEALED = 8 };

inline void put16(bytes &b, size_t o, uint32_t v) { b[o] = v >> 8; b[o + 1] = v; }
inline void put32(bytes &b, size_t o, uint32_t v) { put16(b, o, v >> 16); put16(b, o + 2, v); }
inline uint32_t get16(const bytes &b, size_t o) { return uint32_t(b[o]) << 8 | b[o + 1]; }
inline uint32_t get32(const bytes &b, size_t o) { return get16(b, o) << 16 | get16(b, o + 2); }

// Credits a header announces: limits (PH, NPH, CplH, PD, NPD, CplD) and
// the infinite mask.
struct Credits {
	uint32_t lim[6] = {0, 0, 0, 0, 0, 0};
	uint8_t inf = 0x3f;
};

// header builds the 40-byte dxpu header (docs/protocol.md 1.2).
inline bytes header(uint8_t type, uint8_t flags, uint8_t n, uint16_t body, uint32_t seq, uint32_t ack, uint32_t sack,
                    const Credits &c, uint32_t pair = PAIR) {
	bytes h(40, 0);
	h[0] = 0x10 | flags;
	h[1] = type;
	h[2] = pair >> 16, h[3] = pair >> 8, h[4] = pair;
	h[5] = n;
	put16(h, 6, body);
	put32(h, 8, seq), put32(h, 12, ack), put32(h, 16, sack);
	put16(h, 20, c.lim[0]), put16(h, 22, c.lim[1]), put16(h, 24, c.lim[2]);
	h[26] = c.inf;
	put32(h, 28, c.lim[3]), put32(h, 32, c.lim[4]), put32(h, 36, c.lim[5]);
	return h;
}

// tlps_body is the length table and the TLPs of a TLP frame (FRM-8).
inline bytes tlps_body(const std::vector<bytes> &tlps) {
	bytes b;
	for (auto &t : tlps) b.push_back(t.size() >> 8), b.push_back(t.size());
	for (auto &t : tlps) b.insert(b.end(), t.begin(), t.end());
	return b;
}

// mwr is a 3-DW memory write of whole DWs by 01:00.0.
inline bytes mwr(uint32_t addr, const bytes &data, uint8_t tag = 0) {
	uint32_t dws = data.size() / 4;
	bytes t = {0x40, 0, uint8_t(dws >> 8 & 3), uint8_t(dws), 0x01, 0x00, tag, uint8_t((dws > 1 ? 0xf0 : 0) | 0xf)};
	t.resize(12);
	put32(t, 8, addr);
	t.insert(t.end(), data.begin(), data.end());
	return t;
}

// mrd is a 3-DW memory read of len bytes (whole DWs) by 01:00.0.
inline bytes mrd(uint32_t addr, uint32_t len, uint8_t tag) {
	uint32_t dws = len / 4;
	bytes t = {0x00, 0, uint8_t(dws >> 8 & 3), uint8_t(dws), 0x01, 0x00, tag, uint8_t((dws > 1 ? 0xf0 : 0) | 0xf)};
	t.resize(12);
	put32(t, 8, addr);
	return t;
}

// How a dxpu frame travels (FRM-1, FRM-2).
struct Wrap {
	bool udp = false;
	std::vector<uint16_t> tpids; // tags, outermost first
	size_t pad_to = 0;           // Ethernet padding after the frame
};

inline uint16_t ip_checksum(const bytes &b, size_t o) {
	uint32_t s = 0;
	for (size_t i = o; i < o + 20; i += 2) s += get16(b, i);
	while (s >> 16) s = (s & 0xffff) + (s >> 16);
	return ~s;
}

inline bytes wrap(const bytes &dx, const Wrap &w = {}) {
	bytes f(12);
	for (int i = 0; i < 6; i++) f[i] = BRIDGE_MAC >> (40 - 8 * i), f[6 + i] = HOST_MAC >> (40 - 8 * i);
	uint16_t vid = 100;
	for (auto t : w.tpids) f.push_back(t >> 8), f.push_back(t), f.push_back(0x60), f.push_back(vid++);
	if (!w.udp) {
		f.push_back(0x88), f.push_back(0xb5);
		f.insert(f.end(), dx.begin(), dx.end());
	} else {
		f.push_back(0x08), f.push_back(0x00);
		size_t ip = f.size();
		f.resize(ip + 28);
		f[ip] = 0x45;
		put16(f, ip + 2, 28 + dx.size());
		put16(f, ip + 6, 0x4000); // DF
		f[ip + 8] = 64, f[ip + 9] = 17;
		put32(f, ip + 12, HOST_IP), put32(f, ip + 16, BRIDGE_IP);
		put16(f, ip + 10, ip_checksum(f, ip));
		put16(f, ip + 20, PORT), put16(f, ip + 22, PORT), put16(f, ip + 24, 8 + dx.size());
		f.insert(f.end(), dx.begin(), dx.end());
	}
	while (f.size() < w.pad_to) f.push_back(0xa5);
	return f;
}

// unwrap finds the dxpu frame in an Ethernet frame the bridge sent; empty
// when there is none.
inline bytes unwrap(const bytes &f) {
	size_t o = 12;
	while (o + 2 <= f.size() && (get16(f, o) == 0x8100 || get16(f, o) == 0x88a8)) o += 4;
	if (o + 2 > f.size()) return {};
	uint32_t et = get16(f, o);
	o += 2;
	if (et == 0x88b5) {
		if (o + 40 > f.size()) return {};
		size_t n = 40 + get16(f, o + 6);
		return n + o <= f.size() ? bytes(f.begin() + o, f.begin() + o + n) : bytes{};
	}
	if (et == 0x0800 && o + 28 <= f.size()) {
		size_t n = get16(f, o + 24) - 8;
		o += 28;
		return o + n <= f.size() ? bytes(f.begin() + o, f.begin() + o + n) : bytes{};
	}
	return {};
}

struct Rx { // a frame the bridge sent, from the dxpu header on
	bytes b;
	uint64_t at;
	uint8_t flags() const { return b[0] & 15; }
	uint8_t type() const { return b[1]; }
	uint8_t n() const { return b[5]; }
	uint32_t seq() const { return get32(b, 8); }
	uint32_t ack() const { return get32(b, 12); }
	uint32_t sack() const { return get32(b, 16); }
	uint8_t ctl() const { return b.size() > 40 ? b[40] : 0; }
	// tlp returns the i-th TLP of a TLP frame.
	bytes tlp(int i) const {
		size_t off = 40 + 2 * n();
		for (int k = 0; k < i; k++) off += get16(b, 40 + 2 * k);
		return bytes(b.begin() + off, b.begin() + off + get16(b, 40 + 2 * i));
	}
};

struct Bench {
	std::unique_ptr<VerilatedContext> ctx{new VerilatedContext};
	std::unique_ptr<Vdxpu_bridge_gpu> m;
	uint64_t cycle = 0;

	std::deque<bytes> to_bridge;     // Ethernet frames queued for the MAC receive side
	size_t to_off = 0;
	bytes tx_cur;                    // the frame the bridge is sending
	std::vector<Rx> rx;              // every dxpu frame the bridge sent
	std::vector<bytes> cq;           // TLPs the bridge delivered to the device
	bytes cq_cur;
	std::deque<bytes> cc;            // completions the device returns
	size_t cc_off = 0;
	bool cq_ready = true;
	bool mac_tx_ready = true;        // the MAC takes the bridge's frames (false: it stalls them)
	std::map<uint32_t, uint8_t> mem; // the device's memory

	// Host side of the pair.
	uint32_t session = 0x0a0b0c0d, isn = 0, nxt = 0;
	uint32_t peer_session = 0, peer_isn = 0, rcv = 0;
	Credits cred;                    // what the host announces (infinite unless a test says)
	bool auto_ack = true;            // acknowledge the bridge's TLP frames at once
	bool auto_keepalive = true;      // answer KEEPALIVE probes
	Wrap wrapping;
	size_t seen = 0;                 // frames of rx already handled

	explicit Bench(const std::vector<std::string> &args = {}) {
		std::vector<const char *> argv = {"tb"};
		for (auto &a : args) argv.push_back(a.c_str());
		ctx->commandArgs(argv.size(), argv.data());
		m.reset(new Vdxpu_bridge_gpu(ctx.get()));
		m->cfg_pair = PAIR;
		m->cfg_local_mac = BRIDGE_MAC, m->cfg_peer_mac = HOST_MAC;
		m->cfg_udp = 0, m->cfg_local_ip = BRIDGE_IP, m->cfg_peer_ip = HOST_IP, m->cfg_udp_port = PORT;
		m->cfg_vlan_en = 0, m->cfg_vlan_tci = 0;
		m->rand_seed = 0x1234567;
		reset();
	}
	~Bench() { m->final(); }

	void reset() {
		m->rst = 1;
		for (int i = 0; i < 8; i++) clock();
		m->rst = 0;
		to_bridge.clear(), to_off = 0, tx_cur.clear(), cq_cur.clear(), cc.clear(), cc_off = 0;
		rx.clear(), cq.clear(), seen = 0, peer_session = 0;
	}

	void clock() {
		// Inputs for this edge, from the state after the last one.
		m->tick_us = cycle % US == 0;
		bool have = !to_bridge.empty();
		m->s_mac_tvalid = have;
		if (have) {
			auto &f = to_bridge.front();
			uint64_t d = 0;
			uint8_t k = 0;
			for (int i = 0; i < 8 && to_off + i < f.size(); i++) d |= uint64_t(f[to_off + i]) << (8 * i), k |= 1 << i;
			m->s_mac_tdata = d, m->s_mac_tkeep = k, m->s_mac_tlast = to_off + 8 >= f.size();
		}
		m->m_mac_tready = mac_tx_ready;
		m->m_axis_cq_tready = cq_ready;
		m->m_axis_rc_tready = 1;
		m->s_axis_rq_tvalid = 0;
		bool cc_have = !cc.empty();
		m->s_axis_cc_tvalid = cc_have;
		if (cc_have) {
			auto &t = cc.front();
			uint64_t d = 0;
			uint8_t k = 0;
			for (int i = 0; i < 8 && cc_off + i < t.size(); i++) d |= uint64_t(t[cc_off + i]) << (8 * i), k |= 1 << i;
			m->s_axis_cc_tdata = d, m->s_axis_cc_tkeep = k, m->s_axis_cc_tlast = cc_off + 8 >= t.size();
		}
		m->clk = 0;
		m->eval();
		// Handshakes seen at this edge.
		bool rx_fire = have && m->s_mac_tready, cc_fire = cc_have && m->s_axis_cc_tready;
		bool tx_fire = m->m_mac_tvalid && mac_tx_ready, cq_fire = m->m_axis_cq_tvalid && cq_ready;
		uint64_t txd = m->m_mac_tdata, cqd = m->m_axis_cq_tdata;
		uint8_t txk = m->m_mac_tkeep, cqk = m->m_axis_cq_tkeep;
		bool txl = m->m_mac_tlast, cql = m->m_axis_cq_tlast;
		m->clk = 1;
		m->eval();
		cycle++;
		ctx->timeInc(1);
		if (rx_fire) {
			to_off += 8;
			if (to_off >= to_bridge.front().size()) to_bridge.pop_front(), to_off = 0;
		}
		if (cc_fire) {
			cc_off += 8;
			if (cc_off >= cc.front().size()) cc.pop_front(), cc_off = 0;
		}
		if (tx_fire) {
			for (int i = 0; i < 8; i++)
				if (txk >> i & 1) tx_cur.push_back(txd >> (8 * i));
			if (txl) {
				bytes dx = unwrap(tx_cur);
				if (dx.size() >= 40) rx.push_back({dx, cycle});
				tx_cur.clear();
			}
		}
		if (cq_fire) {
			if (getenv("DEBUG_CQ")) std::fprintf(stderr, "cq %llu: %016llx keep %02x last %d\n", (unsigned long long)cycle, (unsigned long long)cqd, cqk, cql);
			for (int i = 0; i < 8; i++)
				if (cqk >> i & 1) cq_cur.push_back(cqd >> (8 * i));
			if (cql) device(cq_cur), cq.push_back(cq_cur), cq_cur.clear();
		}
		host();
	}

	// device is the memory target: writes stored, reads answered with one
	// CplD from 03:00.0 (the Go bridge's memory device's ID).
	void device(const bytes &t) {
		if (t.size() < 12) return;
		bool four = t[0] & 0x20;
		uint32_t dws = ((t[2] & 3) << 8 | t[3]) ?: 1024;
		uint32_t addr = four ? get32(t, 12) : get32(t, 8);
		size_t hdr = four ? 16 : 12;
		if ((t[0] & 0xdf) == 0x40) {
			for (size_t i = 0; i < 4 * dws && hdr + i < t.size(); i++) mem[addr + i] = t[hdr + i];
		} else if ((t[0] & 0xdf) == 0x00) {
			bytes c = {0x4a, 0, uint8_t(dws >> 8 & 3), uint8_t(dws), 0x03, 0x00, uint8_t((4 * dws) >> 8 & 0xf), uint8_t(4 * dws),
			           t[4], t[5], t[6], uint8_t(addr & 0x7f)};
			for (uint32_t i = 0; i < 4 * dws; i++) c.push_back(mem.count(addr + i) ? mem[addr + i] : 0);
			cc.push_back(c);
		}
	}

	void send(const bytes &dx) { to_bridge.push_back(wrap(dx, wrapping)); }
	void send_raw(const bytes &eth) { to_bridge.push_back(eth); }

	// control builds a control message of the host side.
	bytes control(uint8_t type, uint8_t arg) {
		bytes c(12, 0);
		c[0] = type, c[1] = 1, c[2] = 1, c[3] = arg;
		put32(c, 4, session), put32(c, 8, peer_session);
		if (type == HELLO || type == HELLO_ACK) {
			c.resize(40, 0);
			put16(c, 12, 256), put16(c, 14, 4116), put32(c, 16, isn);
			put16(c, 20, cred.lim[0]), put16(c, 22, cred.lim[1]), put16(c, 24, cred.lim[2]);
			c[26] = cred.inf;
			put32(c, 28, cred.lim[3]), put32(c, 32, cred.lim[4]), put32(c, 36, cred.lim[5]);
		}
		bytes h = header(MSG_CONTROL, up() ? F_ACK | F_CREDIT : 0, 0, c.size(), 0, rcv, 0, cred);
		h.insert(h.end(), c.begin(), c.end());
		return h;
	}
	bool up() const { return m->link_up; }

	// tlp_frame numbers tlps from seq and acknowledges what the host has.
	bytes tlp_frame(uint32_t seq, const std::vector<bytes> &tlps) {
		bytes body = tlps_body(tlps);
		bytes f = header(MSG_TLP, F_ACK | F_CREDIT, tlps.size(), body.size(), seq, rcv, 0, cred);
		f.insert(f.end(), body.begin(), body.end());
		return f;
	}
	bytes ack_frame(uint8_t type = MSG_ACK, uint32_t ack = 0, bool at = false) {
		return header(type, F_ACK | F_CREDIT, 0, 0, 0, at ? ack : rcv, 0, cred);
	}

	// host reacts to the bridge's new frames: learns its session and ISN,
	// acknowledges its TLPs in order and answers keepalives.
	void host() {
		for (; seen < rx.size(); seen++) {
			Rx &f = rx[seen];
			if (f.type() == MSG_CONTROL && (f.ctl() == HELLO || f.ctl() == HELLO_ACK) && f.b.size() >= 80) {
				uint32_t s = get32(f.b, 44);
				if (s != peer_session) peer_session = s, peer_isn = get32(f.b, 56), rcv = peer_isn;
			} else if (f.type() == MSG_CONTROL && f.ctl() == KEEPALIVE && auto_keepalive) {
				send(control(KEEPALIVE_ACK, f.b[43]));
			} else if (f.type() == MSG_TLP && f.seq() == rcv && auto_ack) {
				rcv += f.n();
				send(ack_frame());
			}
		}
	}

	void run(uint64_t cycles) {
		for (uint64_t i = 0; i < cycles; i++) clock();
	}
	template <class F> bool run_until(F done, uint64_t max_cycles) {
		for (uint64_t i = 0; i < max_cycles; i++) {
			if (done()) return true;
			clock();
		}
		return done();
	}
	// settle runs until the queued input is taken and the bridge had time
	// to act on it (byte-serial: a few cycles per byte).
	void settle(uint64_t extra = 4000) {
		run_until([&] { return to_bridge.empty(); }, 200000);
		run(extra);
	}

	// handshake brings the link up as the host with the given ISN.
	bool handshake(uint32_t host_isn) {
		isn = host_isn, nxt = host_isn;
		send(control(HELLO, 8));
		if (!run_until([&] { return peer_session != 0; }, 400 * US)) return false;
		send(control(HELLO_ACK, 8));
		return run_until([&] { return up(); }, 400 * US);
	}

	// last returns the newest frame the bridge sent of a type (or null).
	const Rx *last(uint8_t type, size_t from = 0) const {
		for (size_t i = rx.size(); i > from; i--)
			if (rx[i - 1].type() == type) return &rx[i - 1];
		return nullptr;
	}
	// newest frame carrying a valid Ack since from.
	const Rx *last_ack(size_t from) const {
		for (size_t i = rx.size(); i > from; i--)
			if (rx[i - 1].flags() & F_ACK) return &rx[i - 1];
		return nullptr;
	}
};

} // namespace bench
