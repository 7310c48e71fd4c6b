// verilator-args: test/pkg_funcs.sv
//
// dxpu_pkg's helpers on tables: seq_lt on bridge's TestSeqCompare cases
// (sequence numbers compare modulo 2^32), and the TLP kind and length
// decoders on TLP first DWs (the docs/protocol.md examples and the kinds
// tlp's tests name).
#include "Vpkg_funcs.h"
#include "tb.h"
#include "verilated.h"

int main(int argc, char **argv) {
	Verilated::commandArgs(argc, argv);
	VerilatedContext ctx;
	Vpkg_funcs m(&ctx);
	// bridge/ring_test.go TestSeqCompare
	struct {
		uint32_t a, b;
		bool lt, leq;
	} seq[] = {
	    {1, 2, true, true},
	    {2, 2, false, true},
	    {3, 2, false, false},
	    {0xffffffff, 0, true, true},
	    {0, 0xffffffff, false, false},
	    {0, 0x7fffffff, true, true},
	};
	for (auto &c : seq) {
		tb::scope = "seq_lt " + tb::hex(c.a) + " vs " + tb::hex(c.b);
		m.a = c.a, m.b = c.b;
		m.eval();
		CHECK_EQ(m.lt, c.lt);
		CHECK_EQ(m.leq, c.leq);
	}
	// TLP first DWs: kind, posted or completion, and the bytes the header
	// declares (header, payload, digest).
	struct {
		const char *name;
		uint32_t dw0;
		bool known, cpl, posted;
		unsigned len;
	} tlps[] = {
	    {"MRd 3DW, 1 DW (docs tlp-mrd)", 0x00000001, true, false, false, 12},
	    {"CplD 1 DW (docs tlp-cpld)", 0x4a000001, true, true, false, 16},
	    {"MWr 4DW, 2 DW", 0x60000002, true, false, true, 24},
	    {"MWr 3DW, length 0 = 1024 DW", 0x40000000, true, false, true, 12 + 4096},
	    {"MWr 3DW, 1 DW, TD (ECRC)", 0x40008001, true, false, true, 20},
	    {"MRd 3DW, 1 DW, T9 of a 10-bit tag (no digest)", 0x00800001, true, false, false, 12},
	    {"MRd 4DW, 128 DW (reads carry no data)", 0x20000080, true, false, false, 16},
	    {"Cpl without data", 0x0a000000, true, true, false, 12},
	    {"CfgRd0", 0x04000001, true, false, false, 12},
	    {"CfgWr0 (non-posted)", 0x44000001, true, false, false, 16},
	    {"Msg (posted)", 0x30000000, true, false, true, 16},
	    {"MsgD (posted)", 0x70000001, true, false, true, 20},
	    {"FetchAdd 3DW (atomic, non-posted)", 0x4c000001, true, false, false, 16},
	    {"reserved type 0x1f", 0x1f000001, false, false, false, 12},
	    {"TLP prefix (0x80)", 0x80000001, false, false, false, 12},
	};
	for (auto &c : tlps) {
		tb::scope = c.name;
		m.dw0 = c.dw0;
		m.eval();
		CHECK_EQ(m.known, c.known);
		CHECK_EQ(m.wire_len, c.len);
		if (c.known) {
			CHECK_EQ(m.is_cpl, c.cpl);
			CHECK_EQ(m.is_posted, c.posted);
		}
	}
	// crc32_byte, the ECRC's step (FRM-9): a MWr with TD set whose digest
	// tlp.ComputeECRC gives as 88 cd 50 71 on the wire (Type bit 0 and EP
	// taken as 1: bytes 0 and 2 enter as 0x41 and 0xc0).
	{
		tb::scope = "crc32_byte: the ECRC of a MWr (tlp.ComputeECRC)";
		const uint8_t w[] = {0x41, 0, 0xc0, 2, 0x01, 0x00, 0, 0xff, 0, 0, 0x10, 0x00, 1, 2, 3, 4, 5, 6, 7, 8};
		uint32_t c = 0xffffffff;
		for (uint8_t d : w) {
			m.crc_in = c, m.crc_byte = d;
			m.eval();
			c = m.crc_out;
		}
		CHECK_EQ(~c, 0x7150cd88u); // the wire's 88 cd 50 71, low byte first
		tb::scope = "crc32_byte: CRC-32 of \"123456789\" is 0xcbf43926";
		c = 0xffffffff;
		for (const char *p = "123456789"; *p; p++) {
			m.crc_in = c, m.crc_byte = uint8_t(*p);
			m.eval();
			c = m.crc_out;
		}
		CHECK_EQ(~c, 0xcbf43926u);
	}
	m.final();
	return tb::finish("pkg_funcs");
}
