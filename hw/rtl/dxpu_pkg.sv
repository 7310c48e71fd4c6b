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
        if (dw0[23]) l = l + 13'd4;
        return l;
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
