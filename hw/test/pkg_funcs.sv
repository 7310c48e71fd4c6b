// pkg_funcs: the helper functions of dxpu_pkg as a module, so that the
// testbench tb_pkg_funcs.cpp can judge them on tables.
module pkg_funcs (
    input  logic [31:0] a,
    input  logic [31:0] b,
    output logic        lt,
    output logic        leq,
    input  logic [31:0] dw0,
    output logic [12:0] wire_len,
    output logic        known,
    output logic        is_cpl,
    output logic        is_posted,
    input  logic [31:0] crc_in,
    input  logic [7:0]  crc_byte,
    output logic [31:0] crc_out
);
    assign lt = dxpu_pkg::seq_lt(a, b);
    assign leq = lt || a == b;
    assign wire_len = dxpu_pkg::tlp_wire_len(dw0);
    assign known = dxpu_pkg::tlp_known(dw0[31:24]);
    assign is_cpl = dxpu_pkg::tlp_is_cpl(dw0[31:24]);
    assign is_posted = dxpu_pkg::tlp_is_posted(dw0[31:24]);
    assign crc_out = dxpu_pkg::crc32_byte(crc_in, crc_byte);
endmodule
