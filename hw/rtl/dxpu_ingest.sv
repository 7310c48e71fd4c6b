// dxpu_ingest: takes TLPs from the device (its completions on s_axis_cc,
// its own requests on s_axis_rq) into the retransmit buffer and numbers
// them (SEQ-1). A TLP is taken only when the link is up, it fits the
// window (RTX-1: in flight < min(RTX_SLOTS, peer's window)), the peer's
// credits allow it (CRD-2; completions and requests wait on their own
// streams, so a completion never waits for a stalled non-posted request,
// ORD-2, but waits for a posted one, ORD-4) and,
// for a non-posted request, a wire tag is free (TAG-5: it waits, it is
// never dropped). A request gets a wire tag in the peer's tag space (TAG-1,
// TAG-2); the device's own tag and requester ID are kept by dxpu_tags.
// A TLP longer than SLOT_BYTES or the peer's max TLP is dropped (the device
// must keep its TLPs within both). While the link is down, TLPs from the device are dropped (LNK-4: a
// non-posted request is answered UR by dxpu_tags).
module dxpu_ingest
    import dxpu_pkg::*;
#(
    parameter int RTX_SLOTS = 16,
    parameter int SLOT_BYTES = 512,
    parameter int NTAGS = 32,
    localparam int TXL = $clog2(RTX_SLOTS),
    localparam int SB = $clog2(SLOT_BYTES),
    localparam int TXA = $clog2(RTX_SLOTS * SLOT_BYTES / 8),
    localparam int TGL = $clog2(NTAGS)
) (
    input  logic           clk,
    input  logic           rst,
    input  logic           up,
    input  logic           sess_init,
    input  logic [31:0]    sess_isn,
    input  logic [31:0]    snd_una,
    input  logic [15:0]    peer_window,
    input  logic [15:0]    peer_maxtlp,
    input  logic [5:0]     peer_inf,
    input  logic [31:0]    peer_lim [6],
    input  logic           peer_tag10,

    input  logic [63:0]    s_cc_tdata,
    input  logic [7:0]     s_cc_tkeep,
    input  logic           s_cc_tvalid,
    output logic           s_cc_tready,
    input  logic           s_cc_tlast,
    input  logic [63:0]    s_rq_tdata,
    input  logic [7:0]     s_rq_tkeep,
    input  logic           s_rq_tvalid,
    output logic           s_rq_tready,
    input  logic           s_rq_tlast,

    // retransmit buffer write port
    output logic           rtx_we,
    output logic [TXA-1:0] rtx_waddr,
    output logic [63:0]    rtx_wdata,
    output logic [31:0]    snd_nxt,
    input  logic [TXL-1:0] len_slot,
    output logic [SB:0]    len_q,
    output logic           stalled,

    // tags (dxpu_tags)
    input  logic           tag_free,       // a wire tag is free
    input  logic [TGL-1:0] tag_idx,        // the one to take
    output logic           tag_take,       // pulse: take tag_take_idx for this request
    output logic [TGL-1:0] tag_take_idx,   // tag_idx as it was when the request was taken
    output logic [9:0]     tag_ltag,       // the device's own tag
    output logic [15:0]    tag_lreq,       // and requester ID
    output logic [12:0]    tag_bytes,      // bytes the request asks for
    output logic           np_down,        // pulse: a request arrived while down (answer UR)
    output logic [9:0]     np_down_tag,
    output logic [15:0]    np_down_req,
    output logic [12:0]    np_down_bytes,
    input  logic           np_down_ready   // dxpu_tags can take np_down
);
    logic [SB:0] lens [RTX_SLOTS];
    assign len_q = lens[len_slot];

    typedef enum logic [1:0] {I_IDLE, I_COPY, I_DROP} ist_t;
    ist_t ist;
    logic src_rq;          // the TLP being taken is from s_axis_rq
    logic pref_rq;         // round robin
    logic [SB-4:0] beat;
    logic [31:0] cons [6];
    logic swap;            // rewrite the tag of this request

    // The head TLP of the candidate stream, from its first beat.
    logic cand_rq, cand_v;
    /* verilator lint_off UNUSEDSIGNAL */
    logic [63:0] hd;       // bytes 0-6 of the head TLP (byte 7, the BEs, unused)
    /* verilator lint_on UNUSEDSIGNAL */
    always_comb begin
        cand_rq = pref_rq ? s_rq_tvalid : !s_cc_tvalid;
        cand_v = cand_rq ? s_rq_tvalid : s_cc_tvalid;
        hd = cand_rq ? s_rq_tdata : s_cc_tdata;
    end
    logic [31:0] dw0;
    assign dw0 = {hd[7:0], hd[15:8], hd[23:16], hd[31:24]};
    logic rq_head_posted;   // s_axis_rq's head TLP (at a packet boundary in I_IDLE) is posted
    assign rq_head_posted = tlp_is_posted(s_rq_tdata[7:0]);
    logic is_cpl, is_post, is_np;
    logic [2:0] ht;        // header credit type; data is ht+1
    logic [31:0] need_d;
    logic [12:0] wlen;
    logic [10:0] ndw;
    always_comb begin
        is_cpl = tlp_is_cpl(dw0[31:24]);
        is_post = tlp_is_posted(dw0[31:24]);
        is_np = !is_cpl && !is_post;
        ht = is_cpl ? 3'd4 : (is_post ? 3'd0 : 3'd2);
        ndw = dw0[9:0] == 10'd0 ? 11'd1024 : {1'b0, dw0[9:0]};
        need_d = dw0[30] ? {21'b0, (ndw + 11'd3) >> 2} : 32'd0;
        wlen = tlp_wire_len(dw0);
    end

    // CRD-2: (limit - (consumed + need)) mod 2^N must not be "negative".
    logic cred_ok;
    /* verilator lint_off UNUSEDSIGNAL */
    logic [31:0] dh, dd;   // only their sign bits matter
    /* verilator lint_on UNUSEDSIGNAL */
    always_comb begin
        dh = peer_lim[ht] - (cons[ht] + 32'd1);
        dd = peer_lim[ht + 3'd1] - (cons[ht + 3'd1] + need_d);
        cred_ok = (peer_inf[ht] || !dh[15]) && (peer_inf[ht + 3'd1] || need_d == 32'd0 || !dd[31]);
    end

    logic [31:0] inflight, winlim;
    assign inflight = snd_nxt - snd_una;
    assign winlim = (32'(peer_window) < 32'(RTX_SLOTS)) ? 32'(peer_window) : 32'(RTX_SLOTS);
    logic room;
    assign room = inflight < winlim;

    logic go, drop;
    always_comb begin
        // while down a request waits until its UR can be queued
        // FRM-9: a TLP longer than a slot or the peer's max TLP cannot be sent
        drop = cand_v && (!up ? (!(cand_rq && is_np) || np_down_ready)
                              : (wlen > 13'(SLOT_BYTES) || {3'b0, wlen} > peer_maxtlp));
        // ORD-4: a completion never passes a posted request of the device
        // waiting at the head of s_axis_rq (it may pass a non-posted one, ORD-2)
        go = cand_v && up && !drop && room && cred_ok && (!cand_rq || !is_np || tag_free) &&
             (cand_rq || !(s_rq_tvalid && rq_head_posted));
    end
    logic stall_q;
    assign stalled = stall_q;

    logic fire;
    logic [63:0] cur_data;
    logic [7:0]  cur_keep;
    logic        cur_last;
    assign cur_data = src_rq ? s_rq_tdata : s_cc_tdata;
    assign cur_keep = src_rq ? s_rq_tkeep : s_cc_tkeep;
    assign cur_last = src_rq ? s_rq_tlast : s_cc_tlast;
    assign s_cc_tready = (ist == I_COPY || ist == I_DROP) && !src_rq;
    assign s_rq_tready = (ist == I_COPY || ist == I_DROP) && src_rq;
    assign fire = (ist == I_COPY || ist == I_DROP) && (src_rq ? s_rq_tvalid : s_cc_tvalid);

    // TAG-1, TAG-2: the wire tag in word 0 (byte 1 bits 7 and 3: T9, T8; byte 6)
    logic [9:0] wtag;
    // the tag is latched when the request is taken: tag_idx moves on once it is busy
    assign wtag = peer_tag10 ? 10'(10'd256 + 10'(tag_take_idx)) : 10'(tag_take_idx);
    logic [63:0] wdata;
    always_comb begin
        wdata = cur_data;
        if (swap && beat == '0) begin
            wdata[15] = wtag[9];
            wdata[11] = wtag[8];
            wdata[55:48] = wtag[7:0];
        end
    end

    logic [3:0] nkeep;
    always_comb begin
        nkeep = 4'd0;
        for (int i = 0; i < 8; i++) nkeep = nkeep + {3'b0, cur_keep[i]};
    end

    assign rtx_we = ist == I_COPY && fire;
    assign rtx_waddr = {snd_nxt[TXL-1:0], beat};
    assign rtx_wdata = wdata;

    logic [2:0] cht;
    logic [31:0] cneed;

    always_ff @(posedge clk) begin
        tag_take <= 1'b0;
        np_down <= 1'b0;
        if (rst) begin
            ist <= I_IDLE;
            src_rq <= 1'b0;
            pref_rq <= 1'b0;
            beat <= '0;
            snd_nxt <= 32'd0;
            swap <= 1'b0;
            tag_take_idx <= '0;
            cht <= 3'd0;
            cneed <= 32'd0;
            for (int i = 0; i < 6; i++) cons[i] <= 32'd0;
            stall_q <= 1'b0;
        end else begin
            // CRD-6: a TLP waits for credits (held until one goes or none waits)
            if (ist == I_IDLE && cand_v && up && room && !cred_ok) stall_q <= 1'b1;
            else if (ist != I_IDLE || !(s_cc_tvalid || s_rq_tvalid) || !up) stall_q <= 1'b0;
            if (sess_init) begin
                snd_nxt <= sess_isn;
                for (int i = 0; i < 6; i++) cons[i] <= 32'd0;
            end
            case (ist)
            I_IDLE: begin
                beat <= '0;
                // a stream that cannot go lets the other try (ORD-2)
                if (cand_v && !(go || drop)) pref_rq <= !pref_rq;
                if (!sess_init && (go || drop)) begin
                    src_rq <= cand_rq;
                    pref_rq <= !cand_rq;
                    cht <= ht;
                    cneed <= need_d;
                    swap <= go && cand_rq && is_np;
                    ist <= go ? I_COPY : I_DROP;
                    if (go && cand_rq && is_np) begin
                        tag_take <= 1'b1;
                        tag_take_idx <= tag_idx;
                        tag_ltag <= {dw0[23], dw0[19], hd[55:48]};
                        tag_lreq <= {hd[39:32], hd[47:40]};
                        tag_bytes <= {ndw, 2'b00};
                    end
                    if (drop && cand_rq && is_np && np_down_ready) begin
                        // LNK-4: answered UR at once
                        np_down <= 1'b1;
                        np_down_tag <= {dw0[23], dw0[19], hd[55:48]};
                        np_down_req <= {hd[39:32], hd[47:40]};
                        np_down_bytes <= {ndw, 2'b00};
                    end
                end
            end
            I_COPY, I_DROP: begin
                if (fire) begin
                    beat <= beat + 1'b1;
                    if (cur_last) begin
                        ist <= I_IDLE;
                        if (ist == I_COPY) begin
                            lens[snd_nxt[TXL-1:0]] <= (SB+1)'({beat, 3'b000}) + (SB+1)'(nkeep);
                            snd_nxt <= snd_nxt + 1'b1;
                            cons[cht] <= cons[cht] + 32'd1;
                            cons[cht + 3'd1] <= cons[cht + 3'd1] + cneed;
                        end
                    end
                end
            end
            default: ist <= I_IDLE;
            endcase
        end
    end
endmodule
