// dxpu_deliver: hands the TLPs accepted from the peer to the device in
// sequence order (SEQ-3), from the receive buffer: requests on m_axis_cq;
// completions of the device's own requests on m_axis_rc with the device's
// tag restored (TAG-1, TAG-3; one matching no outstanding request is
// dropped); and the completions dxpu_tags synthesizes (CA on timeout, UR
// on link-down) on m_axis_rc. A slot is freed once its TLP went out.
module dxpu_deliver
    import dxpu_pkg::*;
#(
    parameter int RX_SLOTS = 16,
    parameter int SLOT_BYTES = 512,
    localparam int RXL = $clog2(RX_SLOTS),
    localparam int SB = $clog2(SLOT_BYTES),
    localparam int RXA = $clog2(RX_SLOTS * SLOT_BYTES / 8)
) (
    input  logic           clk,
    input  logic           rst,
    input  logic [RXL:0]   nxt_slot,
    output logic [RXL:0]   del_slot,
    input  logic [SB:0]    del_len,
    output logic [RXA-1:0] raddr,
    input  logic [63:0]    rdata,

    output logic [63:0]    m_cq_tdata,
    output logic [7:0]     m_cq_tkeep,
    output logic           m_cq_tvalid,
    input  logic           m_cq_tready,
    output logic           m_cq_tlast,
    output logic [63:0]    m_rc_tdata,
    output logic [7:0]     m_rc_tkeep,
    output logic           m_rc_tvalid,
    input  logic           m_rc_tready,
    output logic           m_rc_tlast,

    output logic [9:0]     q_wtag,
    output logic [15:0]    q_req,
    input  logic           q_hit,
    input  logic [9:0]     q_ltag,
    input  logic [15:0]    q_lreq,
    output logic           q_done,
    output logic           q_last,
    output logic [12:0]    q_rem,
    output logic           q_drop,
    output logic           rel_valid,   // a request went to the device: its credits return
    output logic           rel_np,
    output logic [8:0]     rel_units,

    input  logic           syn_valid,
    input  logic [9:0]     syn_ltag,
    input  logic [15:0]    syn_lreq,
    input  logic [12:0]    syn_bytes,
    input  logic [2:0]     syn_status,
    output logic           syn_ready
);
    typedef enum logic [2:0] {D_IDLE, D_W0, D_W1, D_DECIDE, D_CPL, D_OUT, D_SYN0, D_SYN1} dst_t;
    dst_t st;
    logic [SB-4:0] ob, last_ob;
    logic [63:0] w0, w1;
    logic to_rc;
    logic [2:0] last_bytes;

    /* verilator lint_off UNUSEDSIGNAL */
    logic [SB:0] del_lm1;   // only its word index is used
    /* verilator lint_on UNUSEDSIGNAL */
    assign del_lm1 = del_len - 1'b1;
    logic [RXL-1:0] ds;
    assign ds = del_slot[RXL-1:0];

    logic fire, out_last;
    logic [63:0] odata;
    logic [7:0] okeep;
    assign out_last = ob == last_ob;
    always_comb begin
        odata = ob == '0 ? w0 : (ob == 1 ? w1 : rdata);
        okeep = 8'hff;
        if (out_last && last_bytes != 3'd0) okeep = 8'hff >> (4'd8 - {1'b0, last_bytes});
    end

    // synthesized completion: Cpl, completer 0, status, Byte Count; then
    // requester, tag, lower address 0
    logic [63:0] s0, s1;
    logic unused;
    assign unused = syn_bytes[12];   // 4096 is Byte Count 0
    assign s0 = {syn_bytes[7:0], syn_status, 1'b0, syn_bytes[11:8], 8'h00, 8'h00, 8'h00, 8'h00,
                 syn_ltag[9], 3'b000, syn_ltag[8], 3'b000, 8'h0a};
    assign s1 = {32'h0, 8'h00, syn_ltag[7:0], syn_lreq[7:0], syn_lreq[15:8]};

    always_comb begin
        m_cq_tdata = odata;
        m_cq_tkeep = okeep;
        m_cq_tlast = out_last;
        m_cq_tvalid = st == D_OUT && !to_rc;
        m_rc_tdata = odata;
        m_rc_tkeep = okeep;
        m_rc_tlast = out_last;
        m_rc_tvalid = st == D_OUT && to_rc;
        if (st == D_SYN0 || st == D_SYN1) begin
            m_rc_tdata = st == D_SYN0 ? s0 : s1;
            m_rc_tkeep = st == D_SYN0 ? 8'hff : 8'h0f;
            m_rc_tlast = st == D_SYN1;
            m_rc_tvalid = 1'b1;
        end
    end
    assign fire = st == D_OUT && (to_rc ? m_rc_tready : m_cq_tready);
    assign syn_ready = st == D_SYN1 && m_rc_tready;

    // RAM address: word 0 and 1 while loading; then one ahead on a beat
    always_comb begin
        case (st)
            D_IDLE: raddr = RXA'({ds, {(SB-3){1'b0}}});
            D_W0: raddr = RXA'({ds, (SB-3)'(1)});
            default: raddr = RXA'({ds, (fire && !out_last) ? ob + 1'b1 : ob});
        endcase
    end

    // the completion's fields (byte i of the TLP is bits 8i+7:8i)
    logic [9:0]  c_tag;
    logic [15:0] c_req;
    logic [11:0] c_bc;
    logic [12:0] c_bcn, c_pay;
    logic        c_last;
    logic [10:0] c_ndw;
    always_comb begin
        c_tag = {w0[15], w0[11], w1[23:16]};
        c_req = {w1[7:0], w1[15:8]};
        c_bc = {w0[51:48], w0[63:56]};
        c_bcn = c_bc == 12'd0 ? 13'd4096 : {1'b0, c_bc};
        c_ndw = {w0[17:16], w0[31:24]} == 10'd0 ? 11'd1024 : {1'b0, w0[17:16], w0[31:24]};
        c_pay = w0[6] ? 13'({c_ndw, 2'b00}) - {11'b0, w1[25:24]} : 13'd0;
        // last: not SC, no data, or carries the last byte (TAG-3)
        c_last = w0[55:53] != 3'b000 || !w0[6] || c_pay >= c_bcn;
    end
    assign q_wtag = c_tag;
    assign q_req = c_req;
    // to dxpu_tags in the cycle of the lookup, while w0/w1 still hold the wire tag
    assign q_done = st == D_CPL && q_hit;
    assign q_drop = st == D_CPL && !q_hit;
    assign q_last = c_last;
    assign q_rem = c_bcn - c_pay;

    always_ff @(posedge clk) begin
        rel_valid <= 1'b0;
        if (rst) begin
            st <= D_IDLE;
            del_slot <= '0;
            ob <= '0;
            last_ob <= '0;
            last_bytes <= '0;
            to_rc <= 1'b0;
            w0 <= 64'd0;
            w1 <= 64'd0;
            rel_np <= 1'b0;
            rel_units <= 9'd0;
        end else begin
            case (st)
            D_IDLE: begin
                ob <= '0;
                if (syn_valid) st <= D_SYN0;
                else if (del_slot != nxt_slot) st <= D_W0;
            end
            D_W0: begin                   // word 0 arrived, word 1 is being read
                w0 <= rdata;
                st <= D_W1;
            end
            D_W1: begin                   // word 1 arrived
                w1 <= rdata;
                st <= D_DECIDE;
            end
            D_DECIDE: begin
                last_ob <= del_lm1[SB-1:3];
                last_bytes <= del_len[2:0];
                to_rc <= tlp_is_cpl(w0[7:0]);
                st <= tlp_is_cpl(w0[7:0]) ? D_CPL : D_OUT;
            end
            D_CPL: begin
                if (!q_hit) begin
                    // TAG-3: a completion matching no outstanding request is dropped
                    del_slot <= del_slot + 1'b1;
                    st <= D_IDLE;
                end else begin
                    // TAG-1: the device's own tag and requester ID again
                    w0[15] <= q_ltag[9];
                    w0[11] <= q_ltag[8];
                    w1[23:16] <= q_ltag[7:0];
                    w1[7:0] <= q_lreq[15:8];
                    w1[15:8] <= q_lreq[7:0];
                    st <= D_OUT;
                end
            end
            D_OUT: begin
                if (fire) begin
                    ob <= ob + 1'b1;
                    if (out_last) begin
                        del_slot <= del_slot + 1'b1;
                        st <= D_IDLE;
                        if (!to_rc) begin
                            rel_valid <= 1'b1;
                            rel_np <= !tlp_is_posted(w0[7:0]);
                            rel_units <= w0[6] ? 9'((c_ndw + 11'd3) >> 2) : 9'd0;
                        end
                    end
                end
            end
            D_SYN0: if (m_rc_tready) st <= D_SYN1;
            D_SYN1: if (m_rc_tready) st <= D_IDLE;
            default: st <= D_IDLE;
            endcase
        end
    end
endmodule
