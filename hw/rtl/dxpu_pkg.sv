// dxpu_pkg: wire-format constants of docs/protocol.md and small helpers
// shared by the GPU-side bridge.
// A constants library: not every design uses every constant or bit.
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off UNUSEDSIGNAL */
package dxpu_pkg;
    localparam logic [15:0] ETHERTYPE_DXPU = 16'h88b5;
    localparam logic [15:0] ETHERTYPE_IPV4 = 16'h0800;
    localparam logic [15:0] TPID_8100 = 16'h8100;
    localparam logic [15:0] TPID_88A8 = 16'h88a8;
    localparam logic [15:0] TPID_9100 = 16'h9100;

    localparam logic [7:0] MSG_TLP = 8'd1;
    localparam logic [7:0] MSG_ACK = 8'd2;
    localparam logic [7:0] MSG_NAK = 8'd3;
    localparam logic [7:0] MSG_CREDIT = 8'd4;
    localparam logic [7:0] MSG_CONTROL = 8'd5;

    localparam logic [7:0] CTL_HELLO = 8'd1;
    localparam logic [7:0] CTL_HELLO_ACK = 8'd2;
    localparam logic [7:0] CTL_KEEPALIVE = 8'd3;
    localparam logic [7:0] CTL_KEEPALIVE_ACK = 8'd4;
    localparam logic [7:0] CTL_RESET = 8'd5;

    localparam logic [7:0] RESET_UNKNOWN_SESSION = 8'd2;
    localparam logic [7:0] RESET_LINK_DOWN = 8'd4;

    localparam logic [3:0] FLAG_ACK = 4'h1;
    localparam logic [3:0] FLAG_CREDIT = 4'h2;
    localparam logic [3:0] FLAG_SACK = 4'h4;
    localparam logic [3:0] FLAG_SEALED = 4'h8;

    localparam logic [7:0] ROLE_HOST = 8'd1;
    localparam logic [7:0] ROLE_GPU = 8'd2;

    // seq_lt: a is before b modulo 2^32.
    function automatic logic seq_lt(input logic [31:0] a, input logic [31:0] b);
        logic [31:0] d;
        d = a - b;
        return d[31];
    endfunction

    // tlp_known reports whether byte 0 of a TLP (Fmt and Type) is a TLP
    // kind the bridge forwards; prefixes and reserved encodings are not.
    function automatic logic tlp_known(input logic [7:0] b0);
        case (b0)
            8'h00, 8'h20, 8'h01, 8'h21, 8'h40, 8'h60,        // MRd, MRdLk, MWr
            8'h02, 8'h42, 8'h04, 8'h44, 8'h05, 8'h45,        // IO, Cfg0, Cfg1
            8'h30, 8'h31, 8'h32, 8'h33, 8'h34, 8'h35,        // Msg
            8'h70, 8'h71, 8'h72, 8'h73, 8'h74, 8'h75,        // MsgD
            8'h0a, 8'h4a, 8'h0b, 8'h4b,                      // Cpl, CplD, CplLk, CplDLk
            8'h4c, 8'h6c, 8'h4d, 8'h6d, 8'h4e, 8'h6e:        // atomics
                return 1'b1;
            default: return 1'b0;
        endcase
    endfunction

    // tlp_wire_len is the byte length a TLP's first four bytes declare:
    // header, payload and digest.
    function automatic logic [12:0] tlp_wire_len(input logic [31:0] dw0);
        logic [12:0] n, l;
        n = {3'b0, dw0[9:0]};
        if (n == 13'd0) n = 13'd1024;
        l = dw0[29] ? 13'd16 : 13'd12;
        if (dw0[30]) l = l + {n[10:0], 2'b00};
        if (dw0[15]) l = l + 13'd4;   // TD, byte 2 bit 7 (bit 23 is T9 of a 10-bit tag)
        return l;
    endfunction

    // crc32_byte: one byte into the CRC-32 of IEEE 802.3 (reflected,
    // polynomial 0xedb88320): the ECRC (FRM-9) is this CRC over the
    // TLP's header and payload, started at all ones, complemented at the
    // end, its low byte first on the wire.
    function automatic logic [31:0] crc32_byte(input logic [31:0] c, input logic [7:0] d);
        logic [31:0] r;
        r = c ^ {24'd0, d};
        for (int i = 0; i < 8; i++) r = (r >> 1) ^ (r[0] ? 32'hedb88320 : 32'd0);
        return r;
    endfunction

    // msg_needs_tc0: message codes that must travel on TC 0 (Unlock, power
    // management, INTx, error messages, Set_Slot_Power_Limit), as tlp.Parse.
    function automatic logic msg_needs_tc0(input logic [7:0] code);
        case (code)
            8'h00, 8'h14, 8'h18, 8'h19, 8'h1b, 8'h30, 8'h31, 8'h33, 8'h50,
            8'h20, 8'h21, 8'h22, 8'h23, 8'h24, 8'h25, 8'h26, 8'h27:
                return 1'b1;
            default: return 1'b0;
        endcase
    endfunction

    // tlp_fields_bad: FRM-9's header field rules of a TLP of a known kind
    // (tlp_known), the checks of tlp.Parse beyond Fmt/Type, lengths, the
    // 4 KiB boundary and the ECRC: b0..b3, b6, b7 and b11 are its header
    // bytes, alow the last byte of its address (byte 11, or 15 with a 4-DW
    // header). Reserved bits outside DW0 are not checked.
    function automatic logic tlp_fields_bad(input logic [7:0] b0, input logic [7:0] b1, input logic [7:0] b2,
                                            input logic [7:0] b3, input logic [7:0] b6, input logic [7:0] b7,
                                            input logic [7:0] b11, input logic [7:0] alow);
        logic [9:0]  lf;     // the Length field (0 = 1024)
        logic [12:0] n4;     // payload bytes, 4 x Length
        logic [12:0] bc;     // a completion's Byte Count (0 = 4096)
        logic [3:0]  fbe, lbe;
        logic        fok, lok;
        lf = {b2[1:0], b3};
        n4 = lf == 10'd0 ? 13'd4096 : {1'b0, lf, 2'b00};
        fbe = b7[3:0];
        lbe = b7[7:4];
        // contiguous: First BE up to byte 3, Last BE from byte 0
        fok = fbe == 4'b1111 || fbe == 4'b1110 || fbe == 4'b1100 || fbe == 4'b1000;
        lok = lbe == 4'b1111 || lbe == 4'b0111 || lbe == 4'b0011 || lbe == 4'b0001;
        bc = {b6[3:0], b7} == 12'd0 ? 13'd4096 : {1'b0, b6[3:0], b7};
        case (b0)
            // IO and configuration: Length 1, TC 0, Attr[1:0] 0, AT 0, Last BE 0
            8'h02, 8'h42, 8'h04, 8'h44, 8'h05, 8'h45:
                return lf != 10'd1 || b1[6:4] != 3'd0 || b2[5:2] != 4'd0 || lbe != 4'd0;
            // memory: byte enables (a read with TH set carries ST there)
            8'h00, 8'h20, 8'h01, 8'h21, 8'h40, 8'h60: begin
                if (b1[0] && !b0[6]) return 1'b0;
                if (lf == 10'd1) return lbe != 4'd0;
                if (fbe == 4'd0 || lbe == 4'd0) return 1'b1;
                // non-contiguous enables only on a QW-aligned 2-DW request
                if (lf == 10'd2 && !alow[2]) return 1'b0;
                return !fok || !lok;
            end
            // FetchAdd, Swap: one 4- or 8-byte operand, naturally aligned
            8'h4c, 8'h6c, 8'h4d, 8'h6d:
                return !(lf == 10'd1 || (lf == 10'd2 && !alow[2]));
            // CAS: 8, 16 or 32 bytes of compare and swap, aligned to half
            8'h4e, 8'h6e:
                return !(lf == 10'd2 || (lf == 10'd4 && !alow[2]) || (lf == 10'd8 && alow[3:2] == 2'b00));
            // CplD, CplDLk: no more data than Byte Count from Lower Address
            8'h4a, 8'h4b:
                return {1'b0, n4} > {1'b0, bc} + {12'd0, b11[1:0]} + 14'd3;
            default: begin
                // messages that need TC 0
                if (b0[4:3] == 2'b10) return b1[6:4] != 3'd0 && msg_needs_tc0(b7);
                return 1'b0;
            end
        endcase
    endfunction

    // tlp_is_cpl: completion kinds (Cpl, CplD, CplLk, CplDLk).
    function automatic logic tlp_is_cpl(input logic [7:0] b0);
        return b0[4:1] == 4'b0101;
    endfunction

    // tlp_is_posted: memory writes and messages.
    function automatic logic tlp_is_posted(input logic [7:0] b0);
        return (b0[6] && b0[4:0] == 5'b00000) || b0[4:3] == 2'b10;
    endfunction
endpackage
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNUSEDPARAM */
