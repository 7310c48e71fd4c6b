// mem_target: a memory-backed PCIe completer behind the simulated bridge's
// CQ/CC streams (simulation only). Memory writes land in memory; memory
// reads are answered with CplDs split at 256-byte boundaries (an MPS of 256,
// a multiple of the 64-byte RCB), with Byte Count and Lower Address as
// PCIe has them; a request outside the window is answered UR (reads) or
// dropped (writes). TLP bytes are as on the PCIe wire.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

class MemTarget {
public:
    MemTarget(uint64_t base, uint64_t size, uint16_t completer)
        : base_(base), mem_(size, 0), completer_(completer) {}

    // handle takes one request TLP; completions to send go to out. It
    // returns what was wrong with the TLP, empty if nothing.
    std::string handle(const std::vector<uint8_t>& t, std::vector<std::vector<uint8_t>>& out) {
        if (t.size() < 12) return "TLP shorter than a header";
        uint8_t b0 = t[0];
        bool four = b0 & 0x20, data = b0 & 0x40;
        uint8_t type = b0 & 0x1f;
        size_t hl = four ? 16 : 12;
        if (t.size() < hl) return "TLP shorter than its header";
        uint32_t n = (uint32_t(t[2] & 3) << 8) | t[3];
        if (n == 0) n = 1024;
        uint16_t req = uint16_t(t[4] << 8 | t[5]);
        uint8_t tag = t[6], fbe = t[7] & 0xf, lbe = t[7] >> 4;
        uint8_t tbits = t[1] & 0x88;  // T9, T8
        uint64_t addr = 0;
        if (four) {
            for (int i = 8; i < 16; i++) addr = addr << 8 | t[size_t(i)];
        } else {
            for (int i = 8; i < 12; i++) addr = addr << 8 | t[size_t(i)];
        }
        addr &= ~uint64_t(3);
        if (type != 0) return "not a memory request (Type " + std::to_string(type) + "), ignored";
        if (data) {
            if (t.size() < hl + 4 * n) return "MWr shorter than its Length";
            for (uint32_t i = 0; i < n; i++) {
                uint8_t be = n == 1 ? fbe : (i == 0 ? fbe : (i == n - 1 ? lbe : 0xf));
                for (int j = 0; j < 4; j++) {
                    if (!(be >> j & 1)) continue;
                    uint64_t a = addr + 4 * i + uint64_t(j);
                    if (a < base_ || a - base_ >= mem_.size()) return "MWr outside the memory window";
                    mem_[a - base_] = t[hl + 4 * i + size_t(j)];
                }
            }
            writes++;
            return "";
        }
        // MRd: the bytes asked for, from the byte enables
        int lead = fbe ? __builtin_ctz(fbe) : 0;
        int trail = 0;
        if (n == 1) {
            trail = fbe ? 3 - (31 - __builtin_clz(uint32_t(fbe))) : 0;
        } else {
            trail = lbe ? 3 - (31 - __builtin_clz(uint32_t(lbe))) : 0;
        }
        uint64_t start = addr + uint64_t(lead);
        uint32_t bytes = 4 * n - uint32_t(lead) - uint32_t(trail);
        if (fbe == 0 && n == 1) bytes = 1;  // zero-length read: one byte, any data
        reads++;
        if (start < base_ || start + bytes - base_ > mem_.size()) {
            out.push_back(cpl(req, tag, tbits, 1, bytes, uint8_t(start & 0x7f), nullptr, 0, 0));
            return "";
        }
        uint64_t a = start, end = start + bytes;
        while (a < end) {
            uint64_t ce = std::min(end, (a & ~uint64_t(255)) + 256);
            uint64_t d0 = a & ~uint64_t(3), d1 = (ce + 3) & ~uint64_t(3);
            out.push_back(cpl(req, tag, tbits, 0, uint32_t(end - a), uint8_t(a & 0x7f), &mem_[d0 - base_],
                              uint32_t((d1 - d0) / 4), d1 - base_ > mem_.size() ? uint32_t(d1 - base_ - mem_.size()) : 0));
            a = ce;
        }
        return "";
    }

    uint64_t reads = 0, writes = 0;

private:
    std::vector<uint8_t> cpl(uint16_t req, uint8_t tag, uint8_t tbits, int status, uint32_t bc, uint8_t la,
                             const uint8_t* d, uint32_t ndw, uint32_t over) {
        std::vector<uint8_t> c(12, 0);
        c[0] = ndw ? 0x4a : 0x0a;
        c[1] = tbits;
        c[2] = uint8_t((ndw >> 8) & 3);
        c[3] = uint8_t(ndw);
        c[4] = uint8_t(completer_ >> 8);
        c[5] = uint8_t(completer_);
        uint32_t bcf = bc & 0xfff;  // 4096 is 0
        c[6] = uint8_t(status << 5 | (bcf >> 8));
        c[7] = uint8_t(bcf);
        c[8] = uint8_t(req >> 8);
        c[9] = uint8_t(req);
        c[10] = tag;
        c[11] = la;
        for (uint32_t i = 0; i < 4 * ndw; i++) c.push_back(i + over < 4 * ndw ? d[i] : 0);
        return c;
    }

    uint64_t base_;
    std::vector<uint8_t> mem_;
    uint16_t completer_;
};
