// harness: the Verilated GPU-side bridge (dxpu_bridge_gpu) as a peer on the
// network. Datagrams arriving on a UDP socket are wrapped in Ethernet
// frames (raw EtherType 0x88b5 or IPv4/UDP, with 0-2 VLAN tags, chosen per
// frame, so every receive path of the RTL runs) and fed to its MAC
// interface; the frames it sends are unwrapped (their IPv4 checksum and
// lengths checked) and sent as datagrams. Behind its PCIe side sits a
// memory target (mem_target.h). tick_us follows the wall clock, so the
// bridge's timers run in real time whatever the simulation speed.
//
// Simulation only: see hw/README.md.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "Vdxpu_bridge_gpu.h"
#include "mem_target.h"
#include "verilated.h"

#ifndef TICK_US
#define TICK_US 100  // the model's tick_us period (hw/Makefile passes the same to both)
#endif

namespace {

using Bytes = std::vector<uint8_t>;

struct Opts {
    std::string listen = "127.0.0.21:8855";
    std::string peer = "127.0.0.20:8855";
    uint32_t pair = 1;
    uint64_t mem_base = 0x2000000000ull;
    uint64_t mem_size = 1 << 20;
    std::string encap = "mixed";   // mixed, udp, eth
    bool tx_udp = true;
    bool tx_vlan = false;
    double loss = 0;               // fraction of frames lost each way
    uint64_t seed = 0;
    double max_seconds = 0;        // 0: run until killed
    bool verbose = false;
    int dma = 0;                   // device reads/writes of host memory to make once up
    uint64_t dma_addr = 0x1000;
};

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "harness: %s\n", msg.c_str());
    std::exit(1);
}

sockaddr_in parse_addr(const std::string& s, const char* what) {
    auto c = s.rfind(':');
    if (c == std::string::npos) die(std::string(what) + " " + s + ": want IP:PORT");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, s.substr(0, c).c_str(), &a.sin_addr) != 1)
        die(std::string(what) + " " + s + ": bad IPv4 address");
    char* end = nullptr;
    long p = std::strtol(s.c_str() + c + 1, &end, 10);
    if (*end != 0 || p <= 0 || p > 65535) die(std::string(what) + " " + s + ": bad port");
    a.sin_port = htons(uint16_t(p));
    return a;
}

uint64_t parse_num(const std::string& s, const char* what) {
    char* end = nullptr;
    errno = 0;
    uint64_t v = std::strtoull(s.c_str(), &end, 0);
    if (errno != 0 || end == s.c_str() || *end != 0) die(std::string(what) + " " + s + ": not a number");
    return v;
}

Opts parse_opts(int argc, char** argv) {
    Opts o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&](const char* name) -> std::string {
            if (i + 1 >= argc) die(std::string(name) + " needs a value");
            return argv[++i];
        };
        if (a == "--listen") o.listen = val("--listen");
        else if (a == "--peer") o.peer = val("--peer");
        else if (a == "--pair") o.pair = uint32_t(parse_num(val("--pair"), "--pair"));
        else if (a == "--mem-base") o.mem_base = parse_num(val("--mem-base"), "--mem-base");
        else if (a == "--mem-size") o.mem_size = parse_num(val("--mem-size"), "--mem-size");
        else if (a == "--encap") o.encap = val("--encap");
        else if (a == "--tx-eth") o.tx_udp = false;
        else if (a == "--tx-vlan") o.tx_vlan = true;
        else if (a == "--loss") o.loss = std::strtod(val("--loss").c_str(), nullptr);
        else if (a == "--seed") o.seed = parse_num(val("--seed"), "--seed");
        else if (a == "--max-seconds") o.max_seconds = std::strtod(val("--max-seconds").c_str(), nullptr);
        else if (a == "-v") o.verbose = true;
        else if (a == "--dma") o.dma = int(parse_num(val("--dma"), "--dma"));
        else if (a == "--dma-addr") o.dma_addr = parse_num(val("--dma-addr"), "--dma-addr");
        else if (a.rfind("+verilator", 0) == 0) continue;
        else die("unknown option " + a + " (have --listen --peer --pair --mem-base --mem-size --encap mixed|udp|eth --tx-eth --tx-vlan --loss F --seed N --max-seconds S --dma N --dma-addr A -v)");
    }
    if (o.encap != "mixed" && o.encap != "udp" && o.encap != "eth") die("--encap " + o.encap + ": want mixed, udp or eth");
    if (o.loss < 0 || o.loss >= 1) die("--loss: want a fraction in [0, 1)");
    if (o.pair == 0 || o.pair > 0xffffff) die("--pair: want 1 to 2^24-1");
    if (o.mem_size == 0 || o.mem_size > (1ull << 30)) die("--mem-size: want 1 byte to 1 GiB");
    return o;
}

const uint8_t kLocalMac[6] = {0x02, 0, 0, 0, 0, 0x02};
const uint8_t kPeerMac[6] = {0x02, 0, 0, 0, 0, 0x01};
constexpr uint16_t kPort = 8855;

uint16_t ip_csum(const uint8_t* h, size_t n) {
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2) s += uint32_t(h[i]) << 8 | h[i + 1];
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return uint16_t(~s);
}

// wrap builds the Ethernet frame the MAC would receive for a datagram.
Bytes wrap(const Bytes& payload, int kind, const sockaddr_in& src, const sockaddr_in& dst) {
    Bytes f;
    f.insert(f.end(), kLocalMac, kLocalMac + 6);
    f.insert(f.end(), kPeerMac, kPeerMac + 6);
    int tags = kind % 3;   // 0, 1 or 2 tags
    bool udp = kind / 3 == 1;
    static const uint16_t tpids[2] = {0x88a8, 0x8100};
    for (int t = 0; t < tags; t++) {
        uint16_t tpid = tags == 2 ? tpids[t] : 0x8100;
        f.push_back(uint8_t(tpid >> 8));
        f.push_back(uint8_t(tpid));
        f.push_back(0x60);
        f.push_back(uint8_t(100 + t));
    }
    if (!udp) {
        f.push_back(0x88);
        f.push_back(0xb5);
        f.insert(f.end(), payload.begin(), payload.end());
        while (f.size() < 60) f.push_back(0);
        return f;
    }
    f.push_back(0x08);
    f.push_back(0x00);
    size_t ip = f.size();
    uint16_t tot = uint16_t(20 + 8 + payload.size());
    uint8_t h[20] = {0x45, 0, uint8_t(tot >> 8), uint8_t(tot), 0, 0, 0x40, 0, 64, 17, 0, 0};
    std::memcpy(h + 12, &src.sin_addr, 4);
    std::memcpy(h + 16, &dst.sin_addr, 4);
    uint16_t c = ip_csum(h, 20);
    h[10] = uint8_t(c >> 8);
    h[11] = uint8_t(c);
    f.insert(f.end(), h, h + 20);
    (void)ip;
    uint16_t ul = uint16_t(8 + payload.size());
    uint16_t sp = ntohs(src.sin_port);
    uint8_t u[8] = {uint8_t(sp >> 8), uint8_t(sp), uint8_t(kPort >> 8), uint8_t(kPort & 0xff), uint8_t(ul >> 8), uint8_t(ul), 0, 0};
    f.insert(f.end(), u, u + 8);
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
}

// unwrap takes the dxpu datagram out of a frame the bridge sent, checking
// what a switch or host stack would; the destination is set for UDP frames.
bool unwrap(const Bytes& f, Bytes& out, sockaddr_in& dst, std::string& why) {
    size_t off = 12;
    if (f.size() < 14) { why = "frame shorter than an Ethernet header"; return false; }
    if (std::memcmp(f.data(), kPeerMac, 6) != 0 || std::memcmp(f.data() + 6, kLocalMac, 6) != 0) {
        why = "MAC addresses are not the configured ones"; return false;
    }
    uint16_t et = uint16_t(f[off] << 8 | f[off + 1]);
    if (et == 0x8100) { off += 4; et = uint16_t(f[off] << 8 | f[off + 1]); }
    off += 2;
    if (et == 0x88b5) {
        if (f.size() < off + 40) { why = "raw frame shorter than the dxpu header"; return false; }
        size_t bl = size_t(f[off + 6]) << 8 | f[off + 7];
        if (f.size() < off + 40 + bl) { why = "raw frame shorter than its body"; return false; }
        out.assign(f.begin() + long(off), f.begin() + long(off + 40 + bl));
        return true;
    }
    if (et != 0x0800) { why = "EtherType neither 0x88b5 nor IPv4"; return false; }
    if (f.size() < off + 28) { why = "IPv4 frame too short"; return false; }
    const uint8_t* ip = f.data() + off;
    if (ip[0] != 0x45 || ip[9] != 17) { why = "not IPv4/UDP with a 20-byte header"; return false; }
    if (ip_csum(ip, 20) != 0) { why = "bad IPv4 header checksum"; return false; }
    size_t tot = size_t(ip[2]) << 8 | ip[3];
    if (off + tot != f.size()) { why = "IPv4 total length is not the frame's"; return false; }
    const uint8_t* u = ip + 20;
    size_t ul = size_t(u[4]) << 8 | u[5];
    if (ul + 20 != tot) { why = "UDP length disagrees with IPv4's"; return false; }
    dst = sockaddr_in{};
    dst.sin_family = AF_INET;
    std::memcpy(&dst.sin_addr, ip + 16, 4);
    dst.sin_port = htons(uint16_t(u[2] << 8 | u[3]));
    out.assign(u + 8, u + ul);
    return true;
}

uint64_t g_ticks = 0;   // ticks given to the model, for the trace

void trace(const char* dir, const uint8_t* p, size_t n, double t) {
    double tt = double(g_ticks) * TICK_US / 1e6;
    if (n < 40) { std::fprintf(stderr, "%10.6f %10.6f %s short %zu\n", t, tt, dir, n); return; }
    auto be32 = [&](size_t o) { return uint32_t(p[o]) << 24 | uint32_t(p[o + 1]) << 16 | uint32_t(p[o + 2]) << 8 | p[o + 3]; };
    std::fprintf(stderr, "%10.6f %10.6f %s type %u flags %x n %u blen %u seq %08x ack %08x sack %08x", t, tt, dir, p[1], p[0] & 15, p[5],
                 unsigned(p[6] << 8 | p[7]), be32(8), be32(12), be32(16));
    if (p[1] == 5 && n >= 52) std::fprintf(stderr, " ctl %u arg %u sess %08x psess %08x", p[40], p[43], be32(44), be32(48));
    if (p[1] == 1 && n >= 54) std::fprintf(stderr, " tlp0 %02x %02x%02x%02x %02x%02x %02x", p[42], p[43], p[44], p[45], p[46], p[47], p[48]);
    std::fprintf(stderr, "\n");
}

// Stream drives one AXI-Stream of whole packets into the model.
struct InStream {
    std::deque<Bytes> q;
    size_t beat = 0;
    void drive(uint64_t& data, uint8_t& keep, uint8_t& valid, uint8_t& last) const {
        if (q.empty()) { valid = 0; data = 0; keep = 0; last = 0; return; }
        const Bytes& p = q.front();
        data = 0;
        keep = 0;
        for (size_t i = 0; i < 8 && beat * 8 + i < p.size(); i++) {
            data |= uint64_t(p[beat * 8 + i]) << (8 * i);
            keep |= uint8_t(1u << i);
        }
        valid = 1;
        last = (beat + 1) * 8 >= p.size();
    }
    void advance() {
        if (q.empty()) return;
        if ((beat + 1) * 8 >= q.front().size()) { q.pop_front(); beat = 0; }
        else beat++;
    }
};

struct OutStream {
    Bytes cur;
    bool take(uint64_t data, uint8_t keep, uint8_t last, Bytes& done) {
        for (int i = 0; i < 8; i++)
            if (keep >> i & 1) cur.push_back(uint8_t(data >> (8 * i)));
        if (!last) return false;
        done.swap(cur);
        cur.clear();
        return true;
    }
};

// Dma plays the device's own requests (the RQ/RC path): once the link is
// up, it writes 64 random bytes to host memory, reads them back and checks
// the completion (own tag and requester ID restored, status SC, the bytes),
// n times, with local tags that are not the wire's.
struct Dma {
    int n = 0, done = 0, failed = 0;
    uint64_t addr = 0;
    enum { kIdle, kWait } st = kIdle;
    Bytes data, got;
    uint8_t tag = 0;
    double since = 0;
    std::string why;
    static Bytes hdr(uint8_t b0, uint32_t ndw, uint8_t tag, uint64_t a) {
        Bytes t = {b0, 0, uint8_t(ndw >> 8 & 3), uint8_t(ndw), 0x03, 0x00, tag, 0xff};
        if (b0 & 0x20) for (int i = 7; i >= 0; i--) t.push_back(uint8_t(a >> (8 * i)));
        else for (int i = 3; i >= 0; i--) t.push_back(uint8_t(a >> (8 * i)));
        return t;
    }
    void step(bool up, double now, std::deque<Bytes>& rq, std::mt19937_64& rng) {
        if (done >= n || !up) return;
        if (st == kIdle) {
            uint64_t a = addr + uint64_t(done % 64) * 64;
            uint8_t fmt4 = a >> 32 ? 0x20 : 0;
            data.resize(64);
            for (auto& b : data) b = uint8_t(rng());
            Bytes w = hdr(0x40 | fmt4, 16, 0, a);
            w.insert(w.end(), data.begin(), data.end());
            rq.push_back(w);
            tag = uint8_t(0x80 + done % 64);
            rq.push_back(hdr(fmt4, 16, tag, a));
            got.clear();
            st = kWait;
            since = now;
        } else if (now - since > 3) {
            fail("no completion within 3 s", now);
        }
    }
    void fail(const std::string& w, double now) {
        // the first failure names its round and how long after the request
        if (why.empty()) why = "round " + std::to_string(done) + ", " + std::to_string(int((now - since) * 1e3)) + " ms after its request: " + w;
        failed++;
        done++;
        st = kIdle;
    }
    void completion(const Bytes& c, double now) {
        if (st != kWait) { fail("a completion nobody waited for", now); return; }
        if (c.size() < 12) { fail("a completion shorter than its header", now); return; }
        if (c[10] != tag || c[8] != 0x03 || c[9] != 0x00) { fail("a completion without the device's own tag and requester ID", now); return; }
        if ((c[6] >> 5) != 0) { fail("completion status " + std::to_string(c[6] >> 5), now); return; }
        got.insert(got.end(), c.begin() + 12, c.end());
        uint32_t bc = uint32_t(c[6] & 0xf) << 8 | c[7];
        if (bc == 0) bc = 4096;
        if (c.size() - 12 < bc) return;   // more to come
        if (got != data) { fail("read back other bytes than written", now); return; }
        done++;
        st = kIdle;
    }
};

}  // namespace

int main(int argc, char** argv) {
    Opts o = parse_opts(argc, argv);
    sockaddr_in la = parse_addr(o.listen, "--listen");
    sockaddr_in pa = parse_addr(o.peer, "--peer");
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) die("socket: " + std::string(std::strerror(errno)));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rcvbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (bind(fd, reinterpret_cast<sockaddr*>(&la), sizeof la) != 0)
        die("bind " + o.listen + ": " + std::strerror(errno));

    std::random_device rd;
    uint64_t seed = o.seed ? o.seed : (uint64_t(rd()) << 32 | rd());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u01(0, 1);

    auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc, argv);
    auto m = std::make_unique<Vdxpu_bridge_gpu>(ctx.get());
    MemTarget mem(o.mem_base, o.mem_size, 0x0300);

    m->cfg_pair = o.pair;
    m->cfg_local_mac = 0x020000000002ull;
    m->cfg_peer_mac = 0x020000000001ull;
    m->cfg_udp = o.tx_udp;
    m->cfg_local_ip = ntohl(la.sin_addr.s_addr);
    m->cfg_peer_ip = ntohl(pa.sin_addr.s_addr);
    m->cfg_udp_port = kPort;
    m->cfg_vlan_en = o.tx_vlan;
    m->cfg_vlan_tci = 0x6064;
    m->rand_seed = uint32_t(rng());
    m->rst = 1;
    m->tick_us = 0;
    for (int i = 0; i < 8; i++) {
        m->clk = 0; m->eval();
        m->clk = 1; m->eval();
    }
    m->rst = 0;

    InStream mac_in, cc_in, rq_in;
    Dma dma;
    dma.n = o.dma;
    dma.addr = o.dma_addr;
    bool dma_reported = o.dma == 0;
    OutStream mac_out, cq_out, rc_out;
    auto t0 = std::chrono::steady_clock::now();
    uint64_t ticks = 0, cycles = 0, rx_frames = 0, tx_frames = 0, lost_in = 0, lost_out = 0, bad_out = 0;
    std::fprintf(stderr, "harness: bridge on %s, peer %s, pair %u, memory %#llx+%llu, seed %llu\n", o.listen.c_str(),
                 o.peer.c_str(), o.pair, (unsigned long long)o.mem_base, (unsigned long long)o.mem_size,
                 (unsigned long long)seed);
    uint8_t buf[9000];
    int idle_loops = 0;
    double last_el = 0;
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    while (!g_stop) {
        // socket -> MAC receive queue
        bool activity = false;
        for (;;) {
            sockaddr_in src{};
            socklen_t sl = sizeof src;
            ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&src), &sl);
            if (n < 0) break;
            activity = true;
            if (o.verbose) trace("in ", buf, size_t(n), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (o.loss > 0 && u01(rng) < o.loss) { lost_in++; continue; }
            int kind = 3;   // UDP, untagged
            if (o.encap == "mixed") kind = int(rng() % 6);
            else if (o.encap == "eth") kind = 0;
            if (mac_in.q.size() < 256) mac_in.q.push_back(wrap(Bytes(buf, buf + n), kind, src, la));
        }
        auto now = std::chrono::steady_clock::now();
        double el = std::chrono::duration<double>(now - t0).count();
        if (o.verbose && el - last_el > 0.03) std::fprintf(stderr, "%10.6f harness: stalled %.1f ms\n", el, (el - last_el) * 1e3);
        last_el = el;
        if (o.max_seconds > 0 && el > o.max_seconds) break;
        uint64_t want = uint64_t(el * 1e6 / TICK_US);
        // a burst of cycles, one tick per cycle while the wall clock is
        // ahead; short when idle so that a loaded machine keeps up
        uint64_t burst = idle_loops > 4 ? std::max<uint64_t>(want > ticks ? want - ticks : 0, 48) : 512;
        for (uint64_t c = 0; c < burst; c++) {
            m->tick_us = ticks < want;
            if (m->tick_us) ticks++;
            g_ticks = ticks;
            uint8_t v, l, k;
            uint64_t d;
            mac_in.drive(d, k, v, l);
            m->s_mac_tdata = d; m->s_mac_tkeep = k; m->s_mac_tvalid = v; m->s_mac_tlast = l;
            cc_in.drive(d, k, v, l);
            m->s_axis_cc_tdata = d; m->s_axis_cc_tkeep = k; m->s_axis_cc_tvalid = v; m->s_axis_cc_tlast = l;
            rq_in.drive(d, k, v, l);
            m->s_axis_rq_tdata = d; m->s_axis_rq_tkeep = k; m->s_axis_rq_tvalid = v; m->s_axis_rq_tlast = l;
            m->m_mac_tready = 1;
            m->m_axis_cq_tready = 1;
            m->m_axis_rc_tready = 1;
            m->clk = 0;
            m->eval();
            // sample handshakes before the edge
            bool mac_in_fire = m->s_mac_tvalid && m->s_mac_tready;
            bool cc_fire = m->s_axis_cc_tvalid && m->s_axis_cc_tready;
            bool rq_fire = m->s_axis_rq_tvalid && m->s_axis_rq_tready;
            bool mac_out_fire = m->m_mac_tvalid && m->m_mac_tready;
            uint64_t mo_d = m->m_mac_tdata; uint8_t mo_k = m->m_mac_tkeep, mo_l = m->m_mac_tlast;
            bool cq_fire = m->m_axis_cq_tvalid && m->m_axis_cq_tready;
            uint64_t cq_d = m->m_axis_cq_tdata; uint8_t cq_k = m->m_axis_cq_tkeep, cq_l = m->m_axis_cq_tlast;
            bool rc_fire = m->m_axis_rc_tvalid && m->m_axis_rc_tready;
            uint64_t rc_d = m->m_axis_rc_tdata; uint8_t rc_k = m->m_axis_rc_tkeep, rc_l = m->m_axis_rc_tlast;
            m->clk = 1;
            m->eval();
            cycles++;
            if (mac_in_fire) { if (mac_in.q.front().size() <= (mac_in.beat + 1) * 8) rx_frames++; mac_in.advance(); activity = true; }
            if (cc_fire) { cc_in.advance(); activity = true; }
            if (rq_fire) { rq_in.advance(); activity = true; }
            Bytes done;
            if (mac_out_fire && mac_out.take(mo_d, mo_k, mo_l, done)) {
                activity = true;
                tx_frames++;
                Bytes dg;
                sockaddr_in dst = pa;
                std::string why;
                if (!unwrap(done, dg, dst, why)) {
                    bad_out++;
                    std::fprintf(stderr, "harness: the bridge sent a bad frame (%s), %zu bytes\n", why.c_str(), done.size());
                } else if (o.loss > 0 && u01(rng) < o.loss) {
                    lost_out++;
                    if (o.verbose) trace("LOST", dg.data(), dg.size(), el);
                } else {
                    if (o.verbose) trace("out", dg.data(), dg.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                    sendto(fd, dg.data(), dg.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
                }
            }
            if (cq_fire && cq_out.take(cq_d, cq_k, cq_l, done)) {
                activity = true;
                std::vector<Bytes> cpls;
                std::string err = mem.handle(done, cpls);
                if (!err.empty()) std::fprintf(stderr, "harness: memory target: %s\n", err.c_str());
                for (auto& c : cpls) cc_in.q.push_back(std::move(c));
            }
            if (rc_fire && rc_out.take(rc_d, rc_k, rc_l, done)) {
                activity = true;
                if (o.verbose) std::fprintf(stderr, "harness: completion for the device, %zu bytes\n", done.size());
                dma.completion(done, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
        }
        dma.step(m->link_up, el, rq_in.q, rng);
        if (!dma_reported && dma.done >= dma.n) {
            dma_reported = true;
            if (dma.failed) std::fprintf(stderr, "harness: dma: %d of %d device write+read rounds failed: %s\n", dma.failed, dma.n, dma.why.c_str());
            else std::fprintf(stderr, "harness: dma: %d device write+read rounds of 64 bytes byte-exact\n", dma.n);
        }
        if (activity || !mac_in.q.empty() || !cc_in.q.empty() || !rq_in.q.empty()) idle_loops = 0;
        else idle_loops++;
        if (idle_loops > 4 && ticks >= want) {
            // nothing moving: wait for a datagram or the next tick
            pollfd p{fd, POLLIN, 0};
            poll(&p, 1, 1);
        }
    }
    std::fprintf(stderr,
                 "harness: %llu cycles, %llu frames in (%llu lost on purpose), %llu out (%llu lost on purpose, %llu bad); bridge counted %u rx, %u bad, %u tx, %u retransmits\n",
                 (unsigned long long)cycles, (unsigned long long)rx_frames, (unsigned long long)lost_in,
                 (unsigned long long)tx_frames, (unsigned long long)lost_out, (unsigned long long)bad_out,
                 m->stat_frames_rx, m->stat_frames_bad, m->stat_frames_tx, m->stat_retransmits);
    m->final();
    return bad_out == 0 && dma.failed == 0 ? 0 : 1;
}
