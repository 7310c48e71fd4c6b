// dxpu_engine: the link of the GPU side of a pair (docs/protocol.md
// sections 1-7 and 10): it parses and validates each received frame whole
// before anything of it takes effect (FRM-10), runs the handshake, the
// keepalive and link-loss timers, the receive sequence (Ack, SACK, NAK,
// the reorder window), the send sequence (acknowledgements, NAK and RTO
// retransmission from the retransmit buffer) and the peer's credit
// limits, and builds every frame it sends.
//
// Datapath: byte-serial. A received frame is read from the frame buffer a
// byte per cycle, twice (validate, then copy accepted TLPs into the
// receive buffer); a frame to send is written into the transmit buffer a
// byte per cycle. Throughput is about one byte per clock each way (2
// Gbit/s at 250 MHz); a wider datapath is the next step, not a change of
// the state machines.
module dxpu_engine
    import dxpu_pkg::*;
#(
    parameter int RX_SLOTS = 16,
    parameter int RTX_SLOTS = 16,
    parameter int SLOT_BYTES = 512,
    parameter int FRAME_BYTES = 2048,
    parameter int TICK_US = 1,           // microseconds between tick_us strobes
    parameter int HELLO_US = 5000,
    parameter int KEEPALIVE_US = 50000,
    parameter int DEAD_AFTER_US = 1000000,
    parameter int RTO_INIT_US = 20000,
    parameter int MIN_RTO_US = 100,
    parameter int MAX_RTO_US = 200000,
    localparam int RXL = $clog2(RX_SLOTS),
    localparam int TXL = $clog2(RTX_SLOTS),
    localparam int SB = $clog2(SLOT_BYTES),
    localparam int LW = $clog2(FRAME_BYTES) + 1,
    localparam int FWA = $clog2(FRAME_BYTES / 8),
    localparam int RXA = $clog2(RX_SLOTS * SLOT_BYTES / 8),
    localparam int TXA = $clog2(RTX_SLOTS * SLOT_BYTES / 8)
) (
    input  logic           clk,
    input  logic           rst,
    input  logic           tick_us,
    input  logic [31:0]    rand_seed,

    input  logic [23:0]    cfg_pair,
    input  logic [47:0]    cfg_local_mac,
    input  logic [47:0]    cfg_peer_mac,
    input  logic           cfg_udp,
    input  logic [31:0]    cfg_local_ip,
    input  logic [31:0]    cfg_peer_ip,
    input  logic [15:0]    cfg_udp_port,
    input  logic           cfg_vlan_en,
    input  logic [15:0]    cfg_vlan_tci,

    // received frame (dxpu_mac_rx)
    input  logic           rxf_valid,
    input  logic [LW-1:0]  rxf_len,
    input  logic           rxf_trunc,
    output logic           rxf_done,
    output logic [FWA-1:0] rxf_raddr,
    input  logic [63:0]    rxf_rdata,

    // frame to send (dxpu_mac_tx)
    output logic           txf_we,
    output logic [LW-2:0]  txf_addr,
    output logic [7:0]     txf_data,
    output logic           txf_start,
    output logic [LW-1:0]  txf_len,
    input  logic           txf_busy,

    // receive buffer: write port (accepted TLPs), delivery pointers
    output logic           rxb_we,
    output logic [7:0]     rxb_wbe,
    output logic [RXA-1:0] rxb_waddr,
    output logic [63:0]    rxb_wdata,
    output logic [RXL:0]   rx_nxt_slot,    // slots before it are in order, ready to deliver
    input  logic [RXL:0]   rx_del_slot,    // the deliverer's next slot
    output logic [SB:0]    rx_del_len,     // length of the TLP in rx_del_slot
    input  logic           rel_valid,      // a request left the receive buffer: its credits return (CRD-5)
    input  logic           rel_np,         // non-posted (else posted)
    input  logic [8:0]     rel_units,      // its data credits (16-byte units)

    // retransmit buffer: read port, and the sender's pointers
    output logic [TXA-1:0] rtx_raddr,
    input  logic [63:0]    rtx_rdata,
    input  logic [31:0]    snd_nxt,        // next sequence number the ingest assigns
    output logic [TXL-1:0] rtx_len_slot,
    input  logic [SB:0]    rtx_len,        // length of the TLP in rtx_len_slot
    input  logic           snd_stalled,    // a TLP waits for credits

    // session state for the ingest and the tags
    output logic           up,
    output logic           sess_init,      // pulse: a session came up
    output logic [31:0]    sess_isn,
    output logic [31:0]    snd_una_o,
    output logic [15:0]    peer_window,
    output logic [15:0]    peer_maxtlp,
    output logic           peer_tag10,
    output logic [5:0]     peer_inf,
    output logic [31:0]    peer_lim [6],

    output logic [31:0]    stat_frames_rx,
    output logic [31:0]    stat_frames_bad,
    output logic [31:0]    stat_frames_tx,
    output logic [31:0]    stat_retransmits
);
    localparam int NMAX = RX_SLOTS; // TLPs per received frame (the peer keeps at most the window in flight)
    // Credits we announce: every request class may fill the receive buffer
    // (the window bounds what is in flight in all classes together);
    // completions, of the device's own requests, are infinite as at a PCIe
    // endpoint.
    localparam logic [15:0] HDR_INIT = 16'(RX_SLOTS);
    localparam logic [31:0] DATA_INIT = 32'(RX_SLOTS * (SLOT_BYTES - 16) / 16);
    localparam logic [7:0]  INF_MASK = 8'h30;   // CplH, CplD

    // ------------------------------------------------------------------
    // Random session nonces and ISNs: a free-running LFSR seeded at reset.
    logic [31:0] lfsr;
    always_ff @(posedge clk) begin
        if (rst) lfsr <= rand_seed | 32'h1;
        else lfsr <= {lfsr[30:0], 1'b0} ^ (lfsr[31] ? 32'h04c11db7 : 32'h0);
    end

    // ------------------------------------------------------------------
    // State
    typedef enum logic [3:0] {
        S_IDLE, S_RX_READ, S_RX_CHECK, S_RX_ACT, S_RX_COPY, S_RX_ADV, S_RX_DONE,
        S_NEWSESS, S_NEWISN, S_TX_BUILD, S_TX_START
    } state_t;
    state_t st;

    logic [31:0] session, isn, peer_session, peer_isn;
    logic        peer_known, echo_sent;
    logic [31:0] rcv_nxt, snd_una, snd_txd;
    logic [RX_SLOTS-1:0] held;
    logic [SB:0] slen [RX_SLOTS];
    logic [RXL:0] nxt_slot;

    logic hello_ack_due, reset_due, ack_due, nak_due, nak_sent;
    logic [7:0]  reset_reason;
    // CTL-3: every KEEPALIVE is answered with its own probe. The probes
    // received and not yet answered wait here, oldest first (a single
    // pending answer lost the first of two KEEPALIVEs taken while the
    // send path was busy); a probe already waiting is not queued twice,
    // and past 8 the oldest is forgotten, as the Go bridge's probeAnswers.
    logic [7:0]  ka_q [8];
    logic [3:0]  ka_n;
    logic        ka_dup;
    logic [31:0] reset_psess, nak_at;
    logic        nak_rtx_due;
    logic [31:0] nak_rtx_seq;
    logic        rtx_active;
    logic [31:0] rtx_ptr, rtx_end;
    logic [2:0]  resets_sent;

    // timers, in ticks of TICK_US
    logic [23:0] t_hello, t_ka, t_rx, t_rto, rto_cur;
    localparam logic [23:0] HELLO_T = 24'(HELLO_US / TICK_US);
    localparam logic [23:0] KA_T = 24'(KEEPALIVE_US / TICK_US);
    localparam logic [23:0] DEAD_T = 24'(DEAD_AFTER_US / TICK_US);
    localparam logic [23:0] RTO0_T = 24'(RTO_INIT_US / TICK_US);
    localparam logic [23:0] RTOMAX_T = 24'(MAX_RTO_US / TICK_US);
    localparam logic [23:0] RTOMIN_T = (MIN_RTO_US / TICK_US) > 0 ? 24'(MIN_RTO_US / TICK_US) : 24'd1;

    // RTX-2: RFC 6298 from one TLP at a time sent once (Karn), in ticks;
    // srtt8 = 8 SRTT, rttvar4 = 4 RTTVAR as in TCP.
    logic [23:0] now_t, samp_t, srtt8, rttvar4;
    logic [31:0] samp_seq;
    logic        samp_active, have_srtt;
    logic [23:0] r_samp, r_delta, r_abs, srtt8_n, rttvar4_n, rto_calc, t_nak;
    always_comb begin
        r_samp = now_t - samp_t;
        r_delta = r_samp - (srtt8 >> 3);
        r_abs = r_delta[23] ? -r_delta : r_delta;
        srtt8_n = have_srtt ? srtt8 - (srtt8 >> 3) + r_samp : {r_samp[20:0], 3'b000};
        rttvar4_n = have_srtt ? rttvar4 - (rttvar4 >> 2) + r_abs : {r_samp[22:0], 1'b0};
        // RTO = SRTT + max(G, 4 RTTVAR), within [MinRTO, MaxRTO], with this sample
        rto_calc = (srtt8_n >> 3) + (rttvar4_n != 24'd0 ? rttvar4_n : 24'd1);
        if (rto_calc < RTOMIN_T) rto_calc = RTOMIN_T;
        if (rto_calc > RTOMAX_T) rto_calc = RTOMAX_T;
    end

    assign snd_una_o = snd_una;
    assign rx_nxt_slot = nxt_slot;
    assign rx_del_len = slen[rx_del_slot[RXL-1:0]];

    // ------------------------------------------------------------------
    // Received frame: the byte reader and the parse of pass 1.
    logic [LW-1:0] rp;          // next byte to read
    logic [LW-1:0] rp_d;        // byte on rxf_rdata now
    logic          rv_d;        // rxf_rdata holds byte rp_d
    logic [7:0]    rb;
    assign rxf_raddr = rp[LW-2:3];
    assign rb = rxf_rdata[8*rp_d[2:0] +: 8];

    typedef enum logic [2:0] {L_ETH, L_IP, L_UDP, L_DX, L_BAD} layer_t;
    layer_t layer;
    logic [LW-1:0] rel;         // byte within the layer
    logic [1:0]  ntags;
    logic [7:0]  et_hi;
    logic [3:0]  ihl;
    logic        via_udp;
    logic [15:0] udp_len, udp_port;
    logic [LW-1:0] ip_off;      // where the IPv4 header starts
    logic [15:0] ip_tot;        // its total length
    logic [7:0]  ip_hi;
    logic [23:0] ip_acc;        // one's complement sum of its 16-bit words
    logic [23:0] ip_sum;
    logic [16:0] ip_f1;
    logic [15:0] ip_f2;
    always_comb begin
        ip_sum = ip_acc + {8'b0, ip_hi, rb};
        ip_f1 = {1'b0, ip_sum[15:0]} + {9'b0, ip_sum[23:16]};
        ip_f2 = ip_f1[15:0] + {15'b0, ip_f1[16]};
    end
    logic [LW-1:0] d_off;       // where the dxpu header starts
    logic        hdr_done;      // all 40 header bytes seen
    // header fields
    logic [7:0]  h_b0, h_type, h_n;
    logic [23:0] h_pair;
    logic [15:0] h_blen;
    logic [31:0] h_seq, h_ack;
    logic [31:0] h_lim [6];
    // control fields (body bytes 0-39)
    logic [7:0]  c_type, c_ver, c_role, c_arg, c_mask;
    logic [31:0] c_sess, c_psess, c_isn;
    logic [15:0] c_win, c_maxtlp;
    logic [31:0] c_cred [6];
    // TLP table and checks
    logic [15:0] lens [NMAX];
    logic [8:0]  ti;            // TLP index
    logic [15:0] tb;            // byte in the TLP
    logic [17:0] lsum;
    logic        tlp_bad;
    logic [23:0] dw0;           // bytes 0-2 of the TLP being checked
    logic        t_mem;         // it is a memory read or write (FRM-9's 4 KiB rule)
    logic        t_4dw;         // with a 4-DW header
    logic [10:0] t_ndw;         // its Length in DWs (1..1024)
    logic [3:0]  t_a11;         // address bits 11:8
    logic [7:0]  t_b3, t_b6, t_b7, t_b11; // header bytes FRM-9's field rules read
    logic        t_td;          // TD: the TLP ends in an ECRC
    logic [31:0] t_crc;         // the ECRC so far (FRM-9); shifted out over the digest
    // ka_dup: the KEEPALIVE just parsed carries a probe that already waits.
    always_comb begin
        ka_dup = 1'b0;
        for (int i = 0; i < 8; i++)
            if (4'(i) < ka_n && ka_q[i] == c_arg) ka_dup = 1'b1;
    end

    // credit field index of header/body offset r (20..39), -1 if none
    function automatic int cred_idx(input logic [LW-1:0] r);
        if (r >= 20 && r < 22) return 0;       // PH
        if (r >= 22 && r < 24) return 2;       // NPH
        if (r >= 24 && r < 26) return 4;       // CplH
        if (r >= 28 && r < 32) return 1;       // PD
        if (r >= 32 && r < 36) return 3;       // NPD
        if (r >= 36 && r < 40) return 5;       // CplD
        return -1;
    endfunction

    logic [LW-1:0] body_rel;   // rel - 40
    assign body_rel = rel - LW'(40);
    int hci, cci;              // credit field of the header / control byte, -1 if none
    assign hci = cred_idx(rel);
    assign cci = cred_idx(body_rel);
    logic [LW-1:0] tbl_len;    // 2N
    assign tbl_len = LW'({h_n, 1'b0});

    // ------------------------------------------------------------------
    // Checks after pass 1
    logic hello_kind, ctl_ok, frame_ok, ack_bad;
    always_comb begin
        hello_kind = c_type == CTL_HELLO || c_type == CTL_HELLO_ACK;
        ctl_ok = h_blen >= 16'd12 && c_ver == 8'd1 && c_role == ROLE_HOST && c_sess != 32'd0 &&
                 c_type >= CTL_HELLO && c_type <= CTL_RESET &&
                 (!hello_kind || (h_blen >= 16'd40 && (c_arg == 8'd8 || c_arg == 8'd10) && c_win != 16'd0 &&
                                  c_maxtlp >= 16'd16 && c_mask[7:6] == 2'b00));
        frame_ok = !rxf_trunc && layer == L_DX && hdr_done &&
                   ({5'b0, d_off} + 17'd40 + {1'b0, h_blen} <= {5'b0, rxf_len}) &&
                   (!via_udp || (udp_len == h_blen + 16'd48 &&
                                 // IPv4 total length: its header and the UDP datagram, within the frame
                                 ip_tot == 16'({ihl, 2'b00}) + udp_len &&
                                 {1'b0, ip_off} + {1'b0, ip_tot[LW-1:0]} <= {1'b0, rxf_len} &&
                                 ip_tot[15:LW] == '0)) &&
                   h_b0[7:4] == 4'd1 && h_b0[3] == 1'b0 && h_type >= MSG_TLP && h_type <= MSG_CONTROL &&
                   h_pair == cfg_pair &&
                   (h_type == MSG_TLP ? (h_n != 8'd0 && {1'b0, h_n} <= 9'(NMAX) && ti == {1'b0, h_n} && !tlp_bad &&
                                         {9'b0, h_n, 1'b0} + lsum == {2'b0, h_blen})
                                      : h_n == 8'd0) &&
                   (h_type != MSG_CONTROL || ctl_ok);
        // ACK-2: an Ack beyond what was sent is corrupt (judged where the
        // frame's fields would apply: every control frame of the current
        // session, HELLO and HELLO-ACK included, as the Go bridge does)
        ack_bad = up && h_b0[0] && seq_lt(snd_txd, h_ack) &&
                  (h_type != MSG_CONTROL || c_sess == peer_session);
    end

    // ------------------------------------------------------------------
    // Pass 2: copying accepted TLPs into the receive buffer.
    logic [LW-1:0] cp_end;     // end of the body
    logic          cp_acc;     // the TLP being copied is accepted
    logic [RXL-1:0] cp_slot;
    logic [RXL:0]  pending;
    assign pending = nxt_slot - rx_del_slot;
    logic [31:0]   cp_off;
    assign cp_off = h_seq + {23'b0, ti} - rcv_nxt;
    logic          acc;
    logic [RXL-1:0] slot;
    always_comb begin
        // SEQ-3: duplicates, held TLPs and the out of window are dropped;
        // decided at each TLP's first byte
        slot = cp_slot;
        acc = cp_acc;
        if (tb == 16'd0) begin
            slot = nxt_slot[RXL-1:0] + cp_off[RXL-1:0];
            acc = !cp_off[31] && cp_off < 32'(RX_SLOTS) - 32'(pending) && !held[slot];
        end
    end

    // ------------------------------------------------------------------
    // Transmit: the frame being built.
    logic [7:0]   tx_msg, tx_ctl, tx_arg;
    logic [31:0]  tx_psess, tx_seq;
    logic [15:0]  tx_blen;
    logic [SB:0]  tx_tlen;
    logic [LW-1:0] bp, bp_d, tx_flen;
    logic         bv_d, tlp_d;
    logic [7:0]   gen_d;
    logic [2:0]   sel_d;
    logic         tx_retx;

    logic [LW-1:0] l2len, dxo;
    assign l2len = cfg_vlan_en ? LW'(18) : LW'(14);
    assign dxo = l2len + (cfg_udp ? LW'(28) : LW'(0));

    logic [15:0] ip_len, udp_len_tx, ip_csum;
    logic [31:0] csum_sum;
    logic [16:0] csum_f;
    always_comb begin
        ip_len = tx_blen + 16'd68;
        udp_len_tx = tx_blen + 16'd48;
        csum_sum = 32'h4500 + {16'b0, ip_len} + 32'h4000 + 32'h4011 + {16'b0, cfg_local_ip[31:16]} +
                   {16'b0, cfg_local_ip[15:0]} + {16'b0, cfg_peer_ip[31:16]} + {16'b0, cfg_peer_ip[15:0]};
        csum_f = {1'b0, csum_sum[15:0]} + {1'b0, csum_sum[31:16]};
        ip_csum = ~(csum_f[15:0] + {15'b0, csum_f[16]});
    end

    // SACK: bit i = TLP rcv_nxt+1+i held
    logic [31:0] rel_cnt [4];   // credits released this session: PH, PD, NPH, NPD
    logic [15:0] lim_ph, lim_nph;
    logic [31:0] lim_pd, lim_npd;
    logic        credit_due;
    assign lim_ph = HDR_INIT + rel_cnt[0][15:0];
    assign lim_pd = DATA_INIT + rel_cnt[1];
    assign lim_nph = HDR_INIT + rel_cnt[2][15:0];
    assign lim_npd = DATA_INIT + rel_cnt[3];

    logic [31:0] sack;
    always_comb begin
        sack = 32'b0;
        for (int i = 0; i < RX_SLOTS - 1; i++) begin
            sack[i] = held[RXL'(nxt_slot[RXL-1:0] + RXL'(1 + i))];
        end
    end

    // byte i (mod 4) of v, most significant first
    function automatic logic [7:0] b32(input logic [31:0] v, input logic [1:0] i);
        logic [1:0] k;
        k = ~i;
        return v[8*k +: 8];
    endfunction

    // gen_byte: byte bp of the frame being built (TLP bytes come from the
    // retransmit buffer instead).
    logic [7:0] gen;
    logic       gen_tlp;
    logic [LW-1:0] r, rb0, rc;
    logic [3:0] flags;
    always_comb begin
        gen = 8'h00;
        gen_tlp = 1'b0;
        r = bp - l2len;
        rb0 = bp - dxo;
        rc = bp - dxo - LW'(40);
        flags = up ? (FLAG_ACK | FLAG_CREDIT | (sack != 32'b0 ? FLAG_SACK : 4'h0)) : 4'h0;
        if (bp < 6) gen = cfg_peer_mac[8*(5 - bp[2:0]) +: 8];
        else if (bp < 12) gen = cfg_local_mac[8*(5 - (bp[2:0] - 3'd6)) +: 8];
        else if (cfg_vlan_en && bp < 16) begin
            case (bp[1:0])
                2'd0: gen = 8'h81;
                2'd1: gen = 8'h00;
                2'd2: gen = cfg_vlan_tci[15:8];
                default: gen = cfg_vlan_tci[7:0];
            endcase
        end else if (bp == l2len - 2) gen = cfg_udp ? 8'h08 : 8'h88;
        else if (bp == l2len - 1) gen = cfg_udp ? 8'h00 : 8'hb5;
        else if (bp < dxo) begin
            case (r)
                0: gen = 8'h45;
                2: gen = ip_len[15:8];
                3: gen = ip_len[7:0];
                6: gen = 8'h40;          // DF
                8: gen = 8'd64;          // TTL
                9: gen = 8'd17;          // UDP
                10: gen = ip_csum[15:8];
                11: gen = ip_csum[7:0];
                12, 13, 14, 15: gen = b32(cfg_local_ip, r[1:0]);
                16, 17, 18, 19: gen = b32(cfg_peer_ip, r[1:0]);
                20, 22: gen = cfg_udp_port[15:8];
                21, 23: gen = cfg_udp_port[7:0];
                24: gen = udp_len_tx[15:8];
                25: gen = udp_len_tx[7:0];
                default: gen = 8'h00;
            endcase
        end else if (rb0 < 40) begin
            case (rb0)
                0: gen = {4'h1, flags};
                1: gen = tx_msg;
                2: gen = cfg_pair[23:16];
                3: gen = cfg_pair[15:8];
                4: gen = cfg_pair[7:0];
                5: gen = tx_msg == MSG_TLP ? 8'd1 : 8'd0;
                6: gen = tx_blen[15:8];
                7: gen = tx_blen[7:0];
                8, 9, 10, 11: gen = b32(tx_seq, rb0[1:0]);
                12, 13, 14, 15: gen = up ? b32(rcv_nxt, rb0[1:0]) : 8'h00;
                16, 17, 18, 19: gen = up ? b32(sack, rb0[1:0]) : 8'h00;
                20: gen = up ? lim_ph[15:8] : 8'h00;
                21: gen = up ? lim_ph[7:0] : 8'h00;
                22: gen = up ? lim_nph[15:8] : 8'h00;
                23: gen = up ? lim_nph[7:0] : 8'h00;
                26: gen = up ? INF_MASK : 8'h00;
                28, 29, 30, 31: gen = up ? b32(lim_pd, rb0[1:0]) : 8'h00;
                32, 33, 34, 35: gen = up ? b32(lim_npd, rb0[1:0]) : 8'h00;
                default: gen = 8'h00;
            endcase
        end else if (rc < LW'(tx_blen)) begin
            if (tx_msg == MSG_TLP) begin
                if (rc == 0) gen = 8'(tx_tlen >> 8);
                else if (rc == 1) gen = tx_tlen[7:0];
                else gen_tlp = 1'b1;
            end else begin
                case (rc)
                    0: gen = tx_ctl;
                    1: gen = 8'd1;
                    2: gen = ROLE_GPU;
                    3: gen = tx_arg;
                    4, 5, 6, 7: gen = b32(session, rc[1:0]);
                    8, 9, 10, 11: gen = b32(tx_psess, rc[1:0]);
                    12: gen = 8'(RX_SLOTS >> 8);
                    13: gen = 8'(RX_SLOTS);
                    14: gen = 8'(SLOT_BYTES >> 8);
                    15: gen = 8'(SLOT_BYTES);
                    16, 17, 18, 19: gen = b32(isn, rc[1:0]);
                    20, 22: gen = HDR_INIT[15:8];
                    21, 23: gen = HDR_INIT[7:0];
                    26: gen = INF_MASK;
                    28, 29, 30, 31, 32, 33, 34, 35: gen = b32(DATA_INIT, rc[1:0]);
                    default: gen = 8'h00;
                endcase
            end
        end
    end

    logic [LW-1:0] tlp_b;   // byte of the TLP when gen_tlp
    assign tlp_b = bp - dxo - LW'(42);
    assign rtx_raddr = TXA'({tx_seq[TXL-1:0], tlp_b[SB-1:0]} >> 3);
    assign rtx_len_slot = tx_sel_slot;

    // What to send next, when the transmit buffer is free.
    logic [TXL-1:0] tx_sel_slot;
    logic [31:0] tx_sel_seq;
    logic        tx_sel_tlp, tx_sel_retx;
    always_comb begin
        tx_sel_tlp = 1'b0;
        tx_sel_retx = 1'b0;
        tx_sel_seq = snd_txd;
        // (a NAKed TLP acknowledged since is not resent: its slot may hold a newer one)
        if (nak_rtx_due && !seq_lt(nak_rtx_seq, snd_una)) begin
            tx_sel_tlp = 1'b1; tx_sel_retx = 1'b1; tx_sel_seq = nak_rtx_seq;
        end else if (rtx_active) begin
            tx_sel_tlp = 1'b1; tx_sel_retx = 1'b1; tx_sel_seq = rtx_ptr;
        end else if (snd_txd != snd_nxt) begin
            tx_sel_tlp = 1'b1;
        end
        tx_sel_slot = tx_sel_seq[TXL-1:0];
    end

    logic ka_due;
    assign ka_due = up && (t_ka >= KA_T || (snd_stalled && snd_una == snd_txd && t_ka >= rto_cur));

    logic need_new;  // a new session of our own once the frame is done
    logic rx_turn;   // alternate between a received frame and a frame to send

    // peer limits only move forward (CRD-4)
    function automatic logic lim_fwd(input int t, input logic [31:0] nw, input logic [31:0] old);
        logic [31:0] d;
        d = nw - old;
        if (t == 0 || t == 2 || t == 4) return d[15:0] != 16'd0 && !d[15];
        return d != 32'd0 && !d[31];
    endfunction

    // ------------------------------------------------------------------
    always_ff @(posedge clk) begin
        rxf_done <= 1'b0;
        txf_start <= 1'b0;
        txf_we <= 1'b0;
        rxb_we <= 1'b0;
        sess_init <= 1'b0;
        if (rst) begin
            st <= S_NEWSESS;
            up <= 1'b0;
            session <= 32'd0;
            isn <= 32'd0;
            peer_session <= 32'd0;
            peer_isn <= 32'd0;
            peer_known <= 1'b0;
            echo_sent <= 1'b0;
            peer_window <= 16'd1;
            peer_maxtlp <= 16'd16;
            peer_tag10 <= 1'b0;
            peer_inf <= 6'd0;
            for (int i = 0; i < 6; i++) peer_lim[i] <= 32'd0;
            rcv_nxt <= 32'd0;
            snd_una <= 32'd0;
            snd_txd <= 32'd0;
            held <= '0;
            nxt_slot <= '0;
            hello_ack_due <= 1'b0;
            ka_n <= 4'd0;
            for (int i = 0; i < 8; i++) ka_q[i] <= 8'd0;
            reset_due <= 1'b0;
            ack_due <= 1'b0;
            credit_due <= 1'b0;
            for (int i = 0; i < 4; i++) rel_cnt[i] <= 32'd0;
            nak_due <= 1'b0;
            nak_sent <= 1'b0;
            nak_at <= 32'd0;
            nak_rtx_due <= 1'b0;
            nak_rtx_seq <= 32'd0;
            rtx_active <= 1'b0;
            rtx_ptr <= 32'd0;
            rtx_end <= 32'd0;
            reset_reason <= 8'd0;
            reset_psess <= 32'd0;
            resets_sent <= 3'd0;
            t_hello <= HELLO_T;
            t_ka <= 24'd0;
            t_rx <= 24'd0;
            t_rto <= 24'd0;
            rto_cur <= RTO0_T;
            now_t <= 24'd0;
            samp_t <= 24'd0;
            samp_seq <= 32'd0;
            samp_active <= 1'b0;
            have_srtt <= 1'b0;
            srtt8 <= 24'd0;
            rttvar4 <= 24'd0;
            t_nak <= 24'd0;
            rx_turn <= 1'b0;
            need_new <= 1'b0;
            rp <= '0;
            rv_d <= 1'b0;
            stat_frames_rx <= 32'd0;
            stat_frames_bad <= 32'd0;
            stat_frames_tx <= 32'd0;
            stat_retransmits <= 32'd0;
            sess_isn <= 32'd0;
        end else begin
            // CRD-5: credits of requests the device took, advertised at once
            if (rel_valid) begin
                rel_cnt[rel_np ? 2 : 0] <= rel_cnt[rel_np ? 2 : 0] + 32'd1;
                rel_cnt[rel_np ? 3 : 1] <= rel_cnt[rel_np ? 3 : 1] + {23'b0, rel_units};
                credit_due <= 1'b1;
            end
            // timers
            if (tick_us) begin
                if (t_hello != 24'hffffff) t_hello <= t_hello + 1'b1;
                if (t_ka != 24'hffffff) t_ka <= t_ka + 1'b1;
                if (t_rx != 24'hffffff) t_rx <= t_rx + 1'b1;
                if (t_rto != 24'hffffff) t_rto <= t_rto + 1'b1;
                if (t_nak != 24'hffffff) t_nak <= t_nak + 1'b1;
                now_t <= now_t + 1'b1;
            end
            // RTO expiry: go back to the oldest unacknowledged TLP (RTX-3)
            if (up && snd_una != snd_txd && t_rto >= rto_cur && !rtx_active && st == S_IDLE) begin
                rtx_active <= 1'b1;
                rtx_ptr <= snd_una;
                rtx_end <= snd_txd;
                t_rto <= 24'd0;
                rto_cur <= (rto_cur >= (RTOMAX_T >> 1)) ? RTOMAX_T : {rto_cur[22:0], 1'b0};
                samp_active <= 1'b0;   // Karn: no sample from a retransmitted TLP
            end
            if (nak_rtx_due && seq_lt(nak_rtx_seq, snd_una)) nak_rtx_due <= 1'b0;
            // NAK-1: the same hole again once it outlives two smoothed RTTs
            if (up && nak_sent && held != '0 && have_srtt && t_nak >= (srtt8 >> 2) && st == S_IDLE) begin
                nak_due <= 1'b1;
                t_nak <= 24'd0;
            end
            if (snd_una == snd_txd) t_rto <= 24'd0;

            case (st)
            // ----------------------------------------------------------
            S_NEWSESS: begin
                ka_n <= 4'd0;   // probes of the session that ended
                // HSK-4: non-zero, not the previous one, not the peer's
                if (lfsr != 32'd0 && lfsr != session && lfsr != peer_session) begin
                    session <= lfsr;
                    st <= S_NEWISN;
                end
            end
            S_NEWISN: begin
                isn <= lfsr ^ {lfsr[15:0], lfsr[31:16]};
                t_hello <= HELLO_T;   // HELLO at once
                st <= S_IDLE;
            end
            // ----------------------------------------------------------
            S_IDLE: begin
                if (up && t_rx >= DEAD_T) begin
                    // LNK-2: down after DeadAfter of silence; say so (RESET 4)
                    up <= 1'b0;
                    held <= '0;
                    reset_due <= 1'b1;
                    reset_reason <= RESET_LINK_DOWN;
                    reset_psess <= peer_session;
                    peer_known <= 1'b0;
                    echo_sent <= 1'b0;
                    rtx_active <= 1'b0;
                    nak_rtx_due <= 1'b0;
                    st <= S_NEWSESS;
                end else if (rxf_valid && !rxf_done && (rx_turn || txf_busy)) begin
                    // (!rxf_done: the frame just released still shows valid for a cycle)
                    rx_turn <= 1'b0;
                    rp <= '0;
                    rv_d <= 1'b0;
                    layer <= L_ETH;
                    rel <= '0;
                    ntags <= 2'd0;
                    via_udp <= 1'b0;
                    hdr_done <= 1'b0;
                    ti <= 9'd0;
                    tb <= 16'd0;
                    lsum <= 18'd0;
                    tlp_bad <= 1'b0;
                    h_n <= 8'd0;
                    h_blen <= 16'd0;
                    c_type <= 8'd0;
                    st <= S_RX_READ;
                end else if (!txf_busy) begin
                    rx_turn <= 1'b1;
                    // choose the next frame to send
                    tx_msg <= MSG_CONTROL;
                    tx_blen <= 16'd12;
                    tx_psess <= peer_known ? peer_session : 32'd0;
                    tx_seq <= snd_nxt;
                    tx_arg <= 8'd0;
                    tx_retx <= 1'b0;
                    bp <= '0;
                    bv_d <= 1'b0;
                    if (reset_due) begin
                        reset_due <= 1'b0;
                        tx_ctl <= CTL_RESET;
                        tx_arg <= reset_reason;
                        tx_psess <= reset_psess;
                        tx_seq <= isn;        // FRM-11: the ISN of the session it starts
                        st <= S_TX_BUILD;
                    end else if (hello_ack_due) begin
                        hello_ack_due <= 1'b0;
                        echo_sent <= 1'b1;
                        tx_ctl <= CTL_HELLO_ACK;
                        tx_seq <= isn;        // FRM-11: a HELLO(-ACK) carries its ISN
                        tx_arg <= 8'd8;
                        tx_blen <= 16'd40;
                        st <= S_TX_BUILD;
                    end else if (ka_n != 4'd0 && up) begin
                        ka_n <= ka_n - 4'd1;
                        for (int i = 0; i < 7; i++) ka_q[i] <= ka_q[i+1];
                        tx_ctl <= CTL_KEEPALIVE_ACK;
                        tx_arg <= ka_q[0];
                        st <= S_TX_BUILD;
                    end else if (!up && t_hello >= HELLO_T) begin
                        t_hello <= 24'd0;
                        tx_ctl <= CTL_HELLO;
                        tx_seq <= isn;
                        tx_arg <= 8'd8;
                        tx_blen <= 16'd40;
                        st <= S_TX_BUILD;
                    end else if (up && nak_due) begin
                        nak_due <= 1'b0;
                        t_nak <= 24'd0;
                        tx_msg <= MSG_NAK;
                        tx_blen <= 16'd0;
                        st <= S_TX_BUILD;
                    end else if (up && tx_sel_tlp) begin
                        tx_msg <= MSG_TLP;
                        tx_seq <= tx_sel_seq;
                        tx_tlen <= rtx_len;
                        tx_blen <= 16'(rtx_len) + 16'd2;
                        tx_retx <= tx_sel_retx;
                        if (nak_rtx_due && !seq_lt(nak_rtx_seq, snd_una)) begin
                            nak_rtx_due <= 1'b0;
                            if (nak_rtx_seq == samp_seq) samp_active <= 1'b0;
                        end else if (rtx_active) begin
                            rtx_ptr <= rtx_ptr + 1'b1;
                            if (rtx_ptr + 1'b1 == rtx_end) rtx_active <= 1'b0;
                        end else begin
                            snd_txd <= snd_txd + 1'b1;
                            if (snd_una == snd_txd) t_rto <= 24'd0;
                            if (!samp_active) begin
                                samp_active <= 1'b1;
                                samp_seq <= snd_txd;
                                samp_t <= now_t;
                            end
                        end
                        st <= S_TX_BUILD;
                    end else if (up && ack_due) begin
                        tx_msg <= MSG_ACK;
                        tx_blen <= 16'd0;
                        st <= S_TX_BUILD;
                    end else if (up && credit_due) begin
                        tx_msg <= MSG_CREDIT;
                        tx_blen <= 16'd0;
                        st <= S_TX_BUILD;
                    end else if (ka_due) begin
                        tx_ctl <= CTL_KEEPALIVE;
                        st <= S_TX_BUILD;
                    end
                    if (reset_due && !(resets_sent < 3'd4)) begin
                        // LNK-6: at most four RESETs per hello interval
                        reset_due <= 1'b0;
                        st <= S_IDLE;
                    end
                end
                if (t_hello >= HELLO_T && up) t_hello <= 24'd0;
                if (t_hello >= HELLO_T) resets_sent <= 3'd0;
            end
            // ----------------------------------------------------------
            S_TX_BUILD: begin
                // stage A: byte bp; stage B: write it
                bv_d <= bp < tx_flen;
                bp_d <= bp;
                gen_d <= gen;
                tlp_d <= gen_tlp;
                sel_d <= tlp_b[2:0];
                if (bp < tx_flen) bp <= bp + 1'b1;
                if (bv_d) begin
                    txf_we <= 1'b1;
                    txf_addr <= bp_d[LW-2:0];
                    txf_data <= tlp_d ? rtx_rdata[8*sel_d +: 8] : gen_d;
                end
                if (!bv_d && bp == tx_flen && bp != '0) st <= S_TX_START;
            end
            S_TX_START: begin
                txf_start <= 1'b1;
                txf_len <= tx_flen;
                stat_frames_tx <= stat_frames_tx + 1'b1;
                if (tx_retx) stat_retransmits <= stat_retransmits + 1'b1;
                if (tx_msg == MSG_CONTROL && tx_ctl == CTL_RESET) resets_sent <= resets_sent + 1'b1;
                t_ka <= 24'd0;
                if (up) ack_due <= 1'b0;
                if (up && !rel_valid) credit_due <= 1'b0;
                st <= S_IDLE;
            end
            // ----------------------------------------------------------
            S_RX_READ: begin
                // pass 1: parse and check every byte
                if (rp < rxf_len) rp <= rp + 1'b1;
                rv_d <= rp < rxf_len;
                rp_d <= rp;
                if (rv_d) begin
                    rel <= rel + 1'b1;
                    case (layer)
                    L_ETH: begin
                        if (rel == 12) et_hi <= rb;
                        if (rel == 13) begin
                            if ({et_hi, rb} == ETHERTYPE_DXPU) begin
                                layer <= L_DX; rel <= '0; d_off <= rp_d + 1'b1;
                            end else if ({et_hi, rb} == ETHERTYPE_IPV4) begin
                                layer <= L_IP; rel <= '0; via_udp <= 1'b1;
                                ip_off <= rp_d + 1'b1;
                                ip_acc <= 24'd0;
                            end else if (({et_hi, rb} == TPID_8100 || {et_hi, rb} == TPID_88A8 ||
                                          {et_hi, rb} == TPID_9100) && ntags != 2'd2) begin
                                ntags <= ntags + 1'b1;
                                rel <= LW'(10);   // the tag's 2 bytes, then the next EtherType at 12
                            end else layer <= L_BAD;
                        end
                    end
                    L_IP: begin
                        if (rel == 0) begin
                            ihl <= rb[3:0];
                            if (rb[7:4] != 4'd4 || rb[3:0] < 4'd5) layer <= L_BAD;
                        end
                        // FRM-2: fragments are dropped
                        if (rel == 6 && (rb[5] || rb[4:0] != 5'd0)) layer <= L_BAD;
                        if (rel == 7 && rb != 8'd0) layer <= L_BAD;
                        if (rel == 9 && rb != 8'd17) layer <= L_BAD;
                        if (rel == 2) ip_tot[15:8] <= rb;
                        if (rel == 3) ip_tot[7:0] <= rb;
                        // the header checksum: its words sum to 0xffff
                        if (!rel[0]) ip_hi <= rb;
                        else ip_acc <= ip_sum;
                        if (rel > 0 && rel == LW'({ihl, 2'b00}) - 1'b1) begin
                            layer <= L_UDP; rel <= '0;
                            if (ip_f2 != 16'hffff) layer <= L_BAD;
                        end
                    end
                    L_UDP: begin
                        if (rel == 2) udp_port[15:8] <= rb;
                        if (rel == 3) udp_port[7:0] <= rb;
                        if (rel == 4) udp_len[15:8] <= rb;
                        if (rel == 5) udp_len[7:0] <= rb;
                        if (rel == 7) begin
                            if (udp_port != cfg_udp_port) layer <= L_BAD;
                            else begin
                                layer <= L_DX; rel <= '0; d_off <= rp_d + 1'b1;
                            end
                        end
                    end
                    L_DX: begin
                        if (rel < 40) begin
                            case (rel)
                                0: h_b0 <= rb;
                                1: h_type <= rb;
                                2, 3, 4: h_pair <= {h_pair[15:0], rb};
                                5: h_n <= rb;
                                6, 7: h_blen <= {h_blen[7:0], rb};
                                8, 9, 10, 11: h_seq <= {h_seq[23:0], rb};
                                12, 13, 14, 15: h_ack <= {h_ack[23:0], rb};
                                default: ;
                            endcase
                            if (hci >= 0) h_lim[hci] <= {h_lim[hci][23:0], rb};
                            if (rel == 39) hdr_done <= 1'b1;
                        end else if (body_rel < LW'(h_blen)) begin
                            if (h_type == MSG_CONTROL) begin
                                case (body_rel)
                                    0: c_type <= rb;
                                    1: c_ver <= rb;
                                    2: c_role <= rb;
                                    3: c_arg <= rb;
                                    4, 5, 6, 7: c_sess <= {c_sess[23:0], rb};
                                    8, 9, 10, 11: c_psess <= {c_psess[23:0], rb};
                                    12, 13: c_win <= {c_win[7:0], rb};
                                    14, 15: c_maxtlp <= {c_maxtlp[7:0], rb};
                                    16, 17, 18, 19: c_isn <= {c_isn[23:0], rb};
                                    26: c_mask <= rb;
                                    default: ;
                                endcase
                                if (cci >= 0) c_cred[cci] <= {c_cred[cci][23:0], rb};
                            end else if (h_type == MSG_TLP) begin
                                if (h_n == 8'd0 || {1'b0, h_n} > 9'(NMAX)) begin
                                    tlp_bad <= 1'b1;
                                end else if (body_rel < tbl_len) begin
                                    // the length table
                                    if (!body_rel[0]) lens[body_rel[RXL:1]][15:8] <= rb;
                                    else begin
                                        lens[body_rel[RXL:1]][7:0] <= rb;
                                        lsum <= lsum + {2'b0, lens[body_rel[RXL:1]][15:8], rb};
                                    end
                                end else if (ti >= {1'b0, h_n}) begin
                                    tlp_bad <= 1'b1;      // bytes after the last TLP
                                end else begin
                                    // FRM-9: lengths and a TLP that parses
                                    if (tb == 16'd0) begin
                                        if (lens[ti[RXL-1:0]] < 16'd12 || lens[ti[RXL-1:0]][1:0] != 2'b00 ||
                                            lens[ti[RXL-1:0]] > 16'(SLOT_BYTES)) begin
                                            tlp_bad <= 1'b1;
                                            layer <= L_BAD;
                                        end
                                    end
                                    if (tb < 16'd3) dw0 <= {dw0[15:0], rb};
                                    if (tb == 16'd2) t_td <= rb[7];
                                    if (tb == 16'd3) t_b3 <= rb;
                                    if (tb == 16'd6) t_b6 <= rb;
                                    if (tb == 16'd7) t_b7 <= rb;
                                    if (tb == 16'd11) t_b11 <= rb;
                                    // FRM-9: the ECRC, when TD is set: CRC-32 of header and
                                    // payload with Type bit 0 and EP taken as 1, compared
                                    // with the digest's bytes in the order of the 802.3 FCS
                                    if (tb == 16'd0) t_crc <= crc32_byte(32'hffffffff, rb | 8'h01);
                                    else if (t_td && tb + 16'd4 >= lens[ti[RXL-1:0]]) begin
                                        if (rb != ~t_crc[7:0]) tlp_bad <= 1'b1;
                                        t_crc <= {8'd0, t_crc[31:8]};
                                    end else t_crc <= crc32_byte(t_crc, tb == 16'd2 ? rb | 8'h40 : rb);
                                    // FRM-9: the header's field rules, at its last byte
                                    if (tb == (t_4dw ? 16'd15 : 16'd11) &&
                                        tlp_fields_bad(dw0[23:16], dw0[15:8], dw0[7:0], t_b3, t_b6, t_b7,
                                                       tb == 16'd11 ? rb : t_b11, rb))
                                        tlp_bad <= 1'b1;
                                    if (tb == 16'd3) begin
                                        if (!tlp_known(dw0[23:16]) ||
                                            {3'b0, tlp_wire_len({dw0, rb})} != lens[ti[RXL-1:0]])
                                            tlp_bad <= 1'b1;
                                        // MRd, MRdLk, MWr
                                        t_mem <= dw0[23] == 1'b0 && dw0[20:17] == 4'b0000;
                                        t_4dw <= dw0[21];
                                        t_ndw <= {dw0[1:0], rb} == 10'd0 ? 11'd1024 : {1'b0, dw0[1:0], rb};
                                    end
                                    // FRM-9: a memory request must not cross a 4 KiB boundary
                                    // (the low address DW is bytes 8-11, or 12-15 with a 4-DW header)
                                    if (tb == (t_4dw ? 16'd14 : 16'd10)) t_a11 <= rb[3:0];
                                    if (tb == (t_4dw ? 16'd15 : 16'd11) && t_mem &&
                                        {1'b0, t_a11, rb[7:2]} + t_ndw > 11'd1024)
                                        tlp_bad <= 1'b1;
                                    if (tb + 16'd1 == lens[ti[RXL-1:0]]) begin
                                        tb <= 16'd0;
                                        ti <= ti + 1'b1;
                                    end else tb <= tb + 1'b1;
                                end
                            end
                        end
                    end
                    default: ;
                    endcase
                end
                if (!rv_d && rp == rxf_len) st <= S_RX_CHECK;
            end
            // ----------------------------------------------------------
            S_RX_CHECK: begin
                if (!frame_ok || ack_bad) begin
                    stat_frames_bad <= stat_frames_bad + 1'b1;
                    st <= S_RX_DONE;
                end else begin
                    stat_frames_rx <= stat_frames_rx + 1'b1;
                    st <= S_RX_ACT;
                end
            end
            S_RX_ACT: begin
                st <= S_RX_DONE;
                if (h_type == MSG_CONTROL) begin
                    case (c_type)
                    CTL_HELLO, CTL_HELLO_ACK: begin
                        if (up && c_sess == peer_session) begin
                            if (c_type == CTL_HELLO) hello_ack_due <= 1'b1;  // HSK-2: its echo was lost
                            t_rx <= 24'd0;
                            // ACK-3: its Ack and credits count like any frame's (the
                            // Go bridge's headerFields); a HELLO-ACK crossing our first
                            // TLP acknowledges it, else it is sent again at the RTO
                            st <= S_RX_ADV;
                        end else begin
                            if (up) begin
                                // LNK-7: the peer restarted; a new session of our own too
                                up <= 1'b0;
                                held <= '0;
                                rtx_active <= 1'b0;
                                nak_rtx_due <= 1'b0;
                                need_new <= 1'b1;
                            end
                            // learn the peer (HSK-5)
                            if (!peer_known || c_sess != peer_session) echo_sent <= 1'b0;
                            peer_known <= 1'b1;
                            peer_session <= c_sess;
                            peer_isn <= c_isn;
                            peer_window <= c_win;
                            peer_maxtlp <= c_maxtlp;
                            peer_tag10 <= c_arg == 8'd10;
                            peer_inf <= c_mask[5:0];
                            for (int i = 0; i < 6; i++) peer_lim[i] <= c_cred[i];
                            // HSK-6: a HELLO-ACK while not up is answered like a HELLO
                            hello_ack_due <= 1'b1;
                            if (!up && c_psess == session && session != 32'd0) begin
                                // HSK-3: our session echoed: up
                                up <= 1'b1;
                                sess_init <= 1'b1;
                                sess_isn <= isn;
                                rcv_nxt <= c_isn;
                                snd_una <= isn;
                                snd_txd <= isn;
                                held <= '0;
                                nak_sent <= 1'b0;
                                nak_due <= 1'b0;
                                rtx_active <= 1'b0;
                                nak_rtx_due <= 1'b0;
                                ack_due <= 1'b1;
                                for (int i = 0; i < 4; i++) rel_cnt[i] <= 32'd0;
                                samp_active <= 1'b0;
                                have_srtt <= 1'b0;
                                t_rx <= 24'd0;
                                t_ka <= 24'd0;
                                rto_cur <= RTO0_T;
                            end
                        end
                    end
                    CTL_KEEPALIVE, CTL_KEEPALIVE_ACK: begin
                        if (up && c_sess == peer_session) begin
                            t_rx <= 24'd0;
                            if (c_type == CTL_KEEPALIVE && !ka_dup) begin   // CTL-3
                                if (ka_n == 4'd8) begin
                                    for (int i = 0; i < 7; i++) ka_q[i] <= ka_q[i+1];
                                    ka_q[7] <= c_arg;
                                end else begin
                                    ka_q[ka_n[2:0]] <= c_arg;
                                    ka_n <= ka_n + 4'd1;
                                end
                            end
                            st <= S_RX_ADV;       // header fields
                        end
                    end
                    CTL_RESET: begin
                        // LNK-6: a RESET of our session, or of none from an unknown peer;
                        // LNK-8: ignored while not up (the handshake goes on)
                        if (up && (c_psess == session ||
                            (c_psess == 32'd0 && !(peer_known && c_sess == peer_session)))) begin
                            up <= 1'b0;
                            held <= '0;
                            peer_known <= 1'b0;
                            echo_sent <= 1'b0;
                            rtx_active <= 1'b0;
                            nak_rtx_due <= 1'b0;
                            need_new <= 1'b1;
                        end
                        // a RESET of the current session that names another one
                        // (ignored) still carries Ack and credits
                        if (up && c_sess == peer_session) st <= S_RX_ADV;
                    end
                    default: ;
                    endcase
                end else if (!up && !(peer_known && echo_sent)) begin
                    // LNK-6: a frame from a peer we have no session with
                    if (!reset_due) begin
                        reset_due <= 1'b1;
                        reset_reason <= RESET_UNKNOWN_SESSION;
                        reset_psess <= 32'd0;
                    end
                end else if (!up && !(h_b0[0] && h_ack == isn)) begin
                    // HSK-6: a late frame of the peer's previous session (a
                    // peer that is up has received nothing yet: its Ack is our
                    // ISN); dropped, no RESET (its HELLO is known)
                    stat_frames_bad <= stat_frames_bad + 1'b1;
                    stat_frames_rx <= stat_frames_rx - 1'b1;
                end else begin
                    if (!up) begin
                        // HSK-3: a frame from the peer whose HELLO we answered
                        up <= 1'b1;
                        sess_init <= 1'b1;
                        sess_isn <= isn;
                        rcv_nxt <= peer_isn;
                        snd_una <= isn;
                        snd_txd <= isn;
                        held <= '0;
                        nak_sent <= 1'b0;
                        rtx_active <= 1'b0;
                        nak_rtx_due <= 1'b0;
                        rto_cur <= RTO0_T;
                        t_ka <= 24'd0;
                        for (int i = 0; i < 4; i++) rel_cnt[i] <= 32'd0;
                        samp_active <= 1'b0;
                        have_srtt <= 1'b0;
                        nak_due <= 1'b0;
                        ack_due <= 1'b1;      // tell the peer (Ack, credits) at once
                    end
                    t_rx <= 24'd0;
                    st <= S_RX_ADV;
                end
            end
            // ----------------------------------------------------------
            // Header fields: Ack, NAK, credits; then TLPs.
            S_RX_ADV: begin
                if (up && h_b0[0]) begin
                    if (seq_lt(snd_una, h_ack) && !seq_lt(snd_txd, h_ack)) begin
                        snd_una <= h_ack;
                        t_rto <= 24'd0;
                        // RTX-2: a sample from a TLP sent once sets the RTO; without
                        // one (Karn) a backed-off RTO stays, as in the Go bridge, or
                        // each TLP after a spurious RTO would be sent twice
                        if (samp_active && seq_lt(samp_seq, h_ack)) begin
                            rto_cur <= rto_calc;
                            samp_active <= 1'b0;
                            have_srtt <= 1'b1;
                            srtt8 <= srtt8_n;
                            rttvar4 <= rttvar4_n;
                        end
                        if (rtx_active && seq_lt(rtx_ptr, h_ack)) rtx_ptr <= h_ack;
                        if (rtx_active && !seq_lt(h_ack, rtx_end)) rtx_active <= 1'b0;
                    end
                    // NAK-2: the TLP at the hole again, at once
                    if (h_type == MSG_NAK && seq_lt(h_ack, snd_txd) && !seq_lt(h_ack, snd_una)) begin
                        nak_rtx_due <= 1'b1;
                        nak_rtx_seq <= h_ack;
                    end
                end
                if (up && h_b0[1]) begin
                    for (int t = 0; t < 6; t++)
                        if (!peer_inf[t] && lim_fwd(t, h_lim[t], peer_lim[t])) peer_lim[t] <= h_lim[t];
                end
                if (h_type == MSG_TLP && up) begin
                    st <= S_RX_COPY;
                    rp <= d_off + LW'(40) + tbl_len;
                    cp_end <= d_off + LW'(40) + LW'(h_blen);
                    rv_d <= 1'b0;
                    ti <= 9'd0;
                    tb <= 16'd0;
                    cp_acc <= 1'b0;
                end else st <= S_RX_DONE;
            end
            // Pass 2: copy accepted TLPs into the receive buffer.
            S_RX_COPY: begin
                if (rp < cp_end) rp <= rp + 1'b1;
                rv_d <= rp < cp_end;
                rp_d <= rp;
                if (rv_d) begin
                    if (tb == 16'd0) begin
                        cp_acc <= acc;
                        cp_slot <= slot;
                        ack_due <= 1'b1;
                    end
                    if (acc) begin
                        rxb_we <= 1'b1;
                        rxb_waddr <= RXA'({slot, tb[SB-1:0]} >> 3);
                        rxb_wbe <= 8'h01 << tb[2:0];
                        rxb_wdata <= {8{rb}};
                    end
                    if (tb + 16'd1 == lens[ti[RXL-1:0]]) begin
                        if (acc) begin
                            held[slot] <= 1'b1;
                            slen[slot] <= lens[ti[RXL-1:0]][SB:0];
                        end
                        tb <= 16'd0;
                        ti <= ti + 1'b1;
                    end else tb <= tb + 1'b1;
                end
                if (!rv_d && rp == cp_end) st <= S_RX_DONE;
            end
            // ----------------------------------------------------------
            S_RX_DONE: begin
                // move the in-order TLPs past Ack, one a cycle
                if (held[nxt_slot[RXL-1:0]]) begin
                    held[nxt_slot[RXL-1:0]] <= 1'b0;
                    nxt_slot <= nxt_slot + 1'b1;
                    rcv_nxt <= rcv_nxt + 1'b1;
                end else begin
                    // NAK-1: once per hole
                    if (held != '0) begin
                        if (!nak_sent || nak_at != rcv_nxt) begin
                            nak_due <= 1'b1;
                            nak_sent <= 1'b1;
                            nak_at <= rcv_nxt;
                        end
                    end else nak_sent <= 1'b0;
                    rxf_done <= 1'b1;
                    need_new <= 1'b0;
                    st <= need_new ? S_NEWSESS : S_IDLE;
                end
            end
            default: st <= S_IDLE;
            endcase
        end
    end

    // frame length to send: headers, dxpu header, body; at least 60 bytes
    always_comb begin
        logic [LW-1:0] l;
        l = dxo + LW'(40) + LW'(tx_blen);
        tx_flen = l < LW'(60) ? LW'(60) : l;
    end

    logic unused;
    assign unused = ^{h_b0[2], bp_d[LW-1], tlp_b[LW-1:SB]};
endmodule
