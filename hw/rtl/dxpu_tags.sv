// dxpu_tags: wire tags of the device's own non-posted requests (section 8).
// Each request forwarded to the host gets a free entry; its index is the
// wire tag (TAG-1, offset by 256 in a 10-bit tag space, TAG-2), and the
// entry keeps the device's own tag and requester ID to restore on the
// completions (TAG-3) and the bytes still owed. A request unanswered for
// CPL_TIMEOUT_US is answered CA (Byte Count = bytes owed) and its tag stays
// quarantined until the late completion comes (and is dropped) or another
// timeout passes (TAG-4). When the link goes down every outstanding request
// is answered UR (LNK-4); a request arriving while down too.
module dxpu_tags #(
    parameter int NTAGS = 32,
    parameter int CPL_TIMEOUT_US = 250000,
    parameter int TICK_US = 1,
    localparam int TGL = $clog2(NTAGS)
) (
    input  logic           clk,
    input  logic           rst,
    input  logic           tick_us,
    input  logic           up,
    input  logic           peer_tag10,
    // allocation (dxpu_ingest)
    output logic           tag_free,
    output logic [TGL-1:0] tag_idx,
    input  logic           tag_take,
    input  logic [TGL-1:0] tag_take_idx,   // the tag_idx the ingest saw when it took the request
    input  logic [9:0]     tag_ltag,
    input  logic [15:0]    tag_lreq,
    input  logic [12:0]    tag_bytes,
    input  logic           np_down,
    input  logic [9:0]     np_down_tag,
    input  logic [15:0]    np_down_req,
    input  logic [12:0]    np_down_bytes,
    output logic           np_down_ready,
    // completion lookup (dxpu_deliver)
    input  logic [9:0]     q_wtag,
    input  logic [15:0]    q_req,
    output logic           q_hit,      // an outstanding, not timed-out request
    output logic [9:0]     q_ltag,
    output logic [15:0]    q_lreq,
    input  logic           q_done,     // pulse: a completion of q_wtag went out
    input  logic           q_last,     // it was the last one
    input  logic [12:0]    q_rem,      // bytes still owed after it
    input  logic           q_drop,     // pulse: a completion of q_wtag was dropped (late)
    // synthesized completions (dxpu_deliver emits them)
    output logic           syn_valid,
    output logic [9:0]     syn_ltag,
    output logic [15:0]    syn_lreq,
    output logic [12:0]    syn_bytes,
    output logic [2:0]     syn_status, // 001 UR, 100 CA
    input  logic           syn_ready
);
    logic [NTAGS-1:0] busy, quar, dn;
    logic [9:0]  ltag [NTAGS];
    logic [15:0] lreq [NTAGS];
    logic [12:0] rem [NTAGS];
    logic [23:0] start [NTAGS];
    logic [23:0] now_us;
    logic        up_q;

    always_comb begin
        tag_free = 1'b0;
        tag_idx = '0;
        for (int i = NTAGS - 1; i >= 0; i--) begin
            if (!busy[i]) begin
                tag_free = 1'b1;
                tag_idx = TGL'(i);
            end
        end
    end

    logic [9:0] qi;
    logic       q_in;
    assign qi = q_wtag - (peer_tag10 ? 10'd256 : 10'd0);
    assign q_in = qi < 10'(NTAGS);
    assign q_hit = q_in && busy[qi[TGL-1:0]] && !quar[qi[TGL-1:0]] && !dn[qi[TGL-1:0]] &&
                   lreq[qi[TGL-1:0]] == q_req;
    assign q_ltag = ltag[qi[TGL-1:0]];
    assign q_lreq = lreq[qi[TGL-1:0]];

    // one synthesized completion at a time
    logic [TGL-1:0] scan;
    logic [23:0] age;
    assign age = now_us - start[scan];
    assign np_down_ready = !syn_valid;

    always_ff @(posedge clk) begin
        if (rst) begin
            busy <= '0;
            quar <= '0;
            dn <= '0;
            now_us <= 24'd0;
            up_q <= 1'b0;
            scan <= '0;
            syn_valid <= 1'b0;
            syn_ltag <= 10'd0;
            syn_lreq <= 16'd0;
            syn_bytes <= 13'd0;
            syn_status <= 3'd0;
        end else begin
            if (tick_us) now_us <= now_us + 1'b1;
            up_q <= up;
            if (syn_valid && syn_ready) syn_valid <= 1'b0;
            scan <= scan + 1'b1;
            if (up_q && !up) dn <= busy & ~quar;   // LNK-4
            if (busy[scan] && !syn_valid) begin
                if (dn[scan]) begin
                    syn_valid <= 1'b1;
                    syn_status <= 3'b001;
                    syn_ltag <= ltag[scan];
                    syn_lreq <= lreq[scan];
                    syn_bytes <= rem[scan];
                    busy[scan] <= 1'b0;
                    dn[scan] <= 1'b0;
                end else if (age >= 24'(CPL_TIMEOUT_US / TICK_US)) begin
                    if (!quar[scan]) begin
                        syn_valid <= 1'b1;
                        syn_status <= 3'b100;
                        syn_ltag <= ltag[scan];
                        syn_lreq <= lreq[scan];
                        syn_bytes <= rem[scan];
                        quar[scan] <= 1'b1;
                        start[scan] <= now_us;
                    end else begin
                        busy[scan] <= 1'b0;
                        quar[scan] <= 1'b0;
                    end
                end
            end else if (np_down && !syn_valid) begin
                syn_valid <= 1'b1;
                syn_status <= 3'b001;
                syn_ltag <= np_down_tag;
                syn_lreq <= np_down_req;
                syn_bytes <= np_down_bytes;
            end
            if (q_done && q_in) begin
                if (q_last) busy[qi[TGL-1:0]] <= 1'b0;
                else rem[qi[TGL-1:0]] <= q_rem;
            end
            if (q_drop && q_in && quar[qi[TGL-1:0]]) begin
                busy[qi[TGL-1:0]] <= 1'b0;
                quar[qi[TGL-1:0]] <= 1'b0;
            end
            if (tag_take) begin
                busy[tag_take_idx] <= 1'b1;
                quar[tag_take_idx] <= 1'b0;
                dn[tag_take_idx] <= 1'b0;
                ltag[tag_take_idx] <= tag_ltag;
                lreq[tag_take_idx] <= tag_lreq;
                rem[tag_take_idx] <= tag_bytes;
                start[tag_take_idx] <= now_us;
            end
        end
    end
endmodule
