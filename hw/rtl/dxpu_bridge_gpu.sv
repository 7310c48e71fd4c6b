// dxpu_bridge_gpu: the GPU side of one dxpu pair (docs/protocol.md),
// unkeyed. MAC side: 64-bit AXI-Stream of Ethernet frames (byte lane i =
// frame byte i, the usual MAC convention). PCIe side: four TLP streams
// named after a hard PCIe core's (Xilinx UltraScale-style CQ/CC/RQ/RC),
// simplified: each packet is one whole TLP as on the PCIe wire (header DWs
// big-endian, byte lane i = TLP byte i), no descriptors or sideband.
//   m_axis_cq: requests from the host to the device (MWr, MRd, ...)
//   s_axis_cc: the device's completions of those requests
//   s_axis_rq: the device's own requests (DMA), wire tags assigned here
//   m_axis_rc: completions of the device's requests, own tags restored
// tick_us is a one-cycle strobe every TICK_US microseconds (a prescaler of
// the core clock in hardware; the simulation harness drives it from the
// wall clock, every 100 us): every protocol timer counts it.
module dxpu_bridge_gpu #(
    parameter int RX_SLOTS = 16,        // receive/reorder buffer, TLPs (power of 2): the window
    parameter int RTX_SLOTS = 16,       // retransmit buffer, TLPs (power of 2)
    parameter int SLOT_BYTES = 512,     // bytes per buffered TLP: the max TLP announced
    parameter int NTAGS = 32,           // wire tags for the device's own requests
    parameter int TICK_US = 1,          // microseconds between tick_us strobes
    parameter int HELLO_US = 5000,
    parameter int KEEPALIVE_US = 50000,
    parameter int DEAD_AFTER_US = 1000000,
    parameter int RTO_INIT_US = 20000,
    parameter int MIN_RTO_US = 100,
    parameter int MAX_RTO_US = 200000,
    parameter int CPL_TIMEOUT_US = 250000
) (
    input  logic        clk,
    input  logic        rst,
    input  logic        tick_us,
    input  logic [31:0] rand_seed,

    input  logic [23:0] cfg_pair,
    input  logic [47:0] cfg_local_mac,
    input  logic [47:0] cfg_peer_mac,
    input  logic        cfg_udp,          // send dxpu-udp (IPv4/UDP) instead of raw EtherType 0x88b5
    input  logic [31:0] cfg_local_ip,
    input  logic [31:0] cfg_peer_ip,
    input  logic [15:0] cfg_udp_port,     // both ports, 8855 by default
    input  logic        cfg_vlan_en,      // send one 802.1Q tag
    input  logic [15:0] cfg_vlan_tci,

    // MAC receive (frames from the fabric)
    input  logic [63:0] s_mac_tdata,
    input  logic [7:0]  s_mac_tkeep,
    input  logic        s_mac_tvalid,
    output logic        s_mac_tready,
    input  logic        s_mac_tlast,
    // MAC transmit
    output logic [63:0] m_mac_tdata,
    output logic [7:0]  m_mac_tkeep,
    output logic        m_mac_tvalid,
    input  logic        m_mac_tready,
    output logic        m_mac_tlast,

    // PCIe: requests to the device
    output logic [63:0] m_axis_cq_tdata,
    output logic [7:0]  m_axis_cq_tkeep,
    output logic        m_axis_cq_tvalid,
    input  logic        m_axis_cq_tready,
    output logic        m_axis_cq_tlast,
    // PCIe: the device's completions
    input  logic [63:0] s_axis_cc_tdata,
    input  logic [7:0]  s_axis_cc_tkeep,
    input  logic        s_axis_cc_tvalid,
    output logic        s_axis_cc_tready,
    input  logic        s_axis_cc_tlast,
    // PCIe: the device's own requests
    input  logic [63:0] s_axis_rq_tdata,
    input  logic [7:0]  s_axis_rq_tkeep,
    input  logic        s_axis_rq_tvalid,
    output logic        s_axis_rq_tready,
    input  logic        s_axis_rq_tlast,
    // PCIe: completions of the device's requests
    output logic [63:0] m_axis_rc_tdata,
    output logic [7:0]  m_axis_rc_tkeep,
    output logic        m_axis_rc_tvalid,
    input  logic        m_axis_rc_tready,
    output logic        m_axis_rc_tlast,

    // status
    output logic        link_up,
    output logic [31:0] stat_frames_rx,
    output logic [31:0] stat_frames_bad,
    output logic [31:0] stat_frames_tx,
    output logic [31:0] stat_retransmits
);
    localparam int FRAME_BYTES = 2048;
    localparam int RXL = $clog2(RX_SLOTS);
    localparam int TXL = $clog2(RTX_SLOTS);
    localparam int SB = $clog2(SLOT_BYTES);
    localparam int LW = $clog2(FRAME_BYTES) + 1;
    localparam int FWA = $clog2(FRAME_BYTES / 8);
    localparam int RXA = $clog2(RX_SLOTS * SLOT_BYTES / 8);
    localparam int TXA = $clog2(RTX_SLOTS * SLOT_BYTES / 8);
    localparam int TGL = $clog2(NTAGS);

    // received frames
    logic           rxf_valid, rxf_trunc, rxf_done;
    logic [LW-1:0]  rxf_len;
    logic [FWA-1:0] rxf_raddr;
    logic [63:0]    rxf_rdata;
    dxpu_mac_rx #(.FRAME_BYTES(FRAME_BYTES)) mac_rx (
        .clk(clk), .rst(rst), .s_tdata(s_mac_tdata), .s_tkeep(s_mac_tkeep), .s_tvalid(s_mac_tvalid),
        .s_tready(s_mac_tready), .s_tlast(s_mac_tlast), .frame_valid(rxf_valid), .frame_len(rxf_len),
        .frame_trunc(rxf_trunc), .frame_done(rxf_done), .raddr(rxf_raddr), .rdata(rxf_rdata));

    // frames to send
    logic           txf_we, txf_start, txf_busy;
    logic [LW-2:0]  txf_addr;
    logic [7:0]     txf_data;
    logic [LW-1:0]  txf_len;
    dxpu_mac_tx #(.FRAME_BYTES(FRAME_BYTES)) mac_tx (
        .clk(clk), .rst(rst), .bwe(txf_we), .baddr(txf_addr), .bdata(txf_data), .start(txf_start),
        .len(txf_len), .busy(txf_busy), .m_tdata(m_mac_tdata), .m_tkeep(m_mac_tkeep),
        .m_tvalid(m_mac_tvalid), .m_tready(m_mac_tready), .m_tlast(m_mac_tlast));

    // receive buffer: TLPs accepted from the peer (the reorder window)
    logic           rxb_we;
    logic [7:0]     rxb_wbe;
    logic [RXA-1:0] rxb_waddr, rxb_raddr;
    logic [63:0]    rxb_wdata, rxb_rdata;
    logic [RXL:0]   rx_nxt_slot, rx_del_slot;
    logic [SB:0]    rx_del_len;
    logic           rel_valid, rel_np;
    logic [8:0]     rel_units;
    dxpu_ram #(.WIDTH(64), .DEPTH(RX_SLOTS * SLOT_BYTES / 8)) rx_buf (
        .clk(clk), .we(rxb_we), .wbe(rxb_wbe), .waddr(rxb_waddr), .wdata(rxb_wdata),
        .raddr(rxb_raddr), .rdata(rxb_rdata));

    // retransmit buffer: TLPs sent to the peer until acknowledged
    logic           rtx_we;
    logic [TXA-1:0] rtx_waddr, rtx_raddr;
    logic [63:0]    rtx_wdata, rtx_rdata;
    logic [31:0]    snd_nxt, snd_una, sess_isn;
    logic [TXL-1:0] rtx_len_slot;
    logic [SB:0]    rtx_len;
    logic           snd_stalled, up, sess_init, peer_tag10;
    logic [15:0]    peer_window, peer_maxtlp;
    logic [5:0]     peer_inf;
    logic [31:0]    peer_lim [6];
    dxpu_ram #(.WIDTH(64), .DEPTH(RTX_SLOTS * SLOT_BYTES / 8)) rtx_buf (
        .clk(clk), .we(rtx_we), .wbe(8'hff), .waddr(rtx_waddr), .wdata(rtx_wdata),
        .raddr(rtx_raddr), .rdata(rtx_rdata));

    dxpu_engine #(
        .RX_SLOTS(RX_SLOTS), .RTX_SLOTS(RTX_SLOTS), .SLOT_BYTES(SLOT_BYTES), .FRAME_BYTES(FRAME_BYTES),
        .TICK_US(TICK_US), .HELLO_US(HELLO_US), .KEEPALIVE_US(KEEPALIVE_US), .DEAD_AFTER_US(DEAD_AFTER_US),
        .RTO_INIT_US(RTO_INIT_US), .MIN_RTO_US(MIN_RTO_US), .MAX_RTO_US(MAX_RTO_US)
    ) engine (
        .clk(clk), .rst(rst), .tick_us(tick_us), .rand_seed(rand_seed),
        .cfg_pair(cfg_pair), .cfg_local_mac(cfg_local_mac), .cfg_peer_mac(cfg_peer_mac), .cfg_udp(cfg_udp),
        .cfg_local_ip(cfg_local_ip), .cfg_peer_ip(cfg_peer_ip), .cfg_udp_port(cfg_udp_port),
        .cfg_vlan_en(cfg_vlan_en), .cfg_vlan_tci(cfg_vlan_tci),
        .rxf_valid(rxf_valid), .rxf_len(rxf_len), .rxf_trunc(rxf_trunc), .rxf_done(rxf_done),
        .rxf_raddr(rxf_raddr), .rxf_rdata(rxf_rdata),
        .txf_we(txf_we), .txf_addr(txf_addr), .txf_data(txf_data), .txf_start(txf_start), .txf_len(txf_len),
        .txf_busy(txf_busy),
        .rxb_we(rxb_we), .rxb_wbe(rxb_wbe), .rxb_waddr(rxb_waddr), .rxb_wdata(rxb_wdata),
        .rx_nxt_slot(rx_nxt_slot), .rx_del_slot(rx_del_slot), .rx_del_len(rx_del_len),
        .rel_valid(rel_valid), .rel_np(rel_np), .rel_units(rel_units),
        .rtx_raddr(rtx_raddr), .rtx_rdata(rtx_rdata), .snd_nxt(snd_nxt), .rtx_len_slot(rtx_len_slot),
        .rtx_len(rtx_len), .snd_stalled(snd_stalled),
        .up(up), .sess_init(sess_init), .sess_isn(sess_isn), .snd_una_o(snd_una), .peer_window(peer_window), .peer_maxtlp(peer_maxtlp),
        .peer_tag10(peer_tag10), .peer_inf(peer_inf), .peer_lim(peer_lim),
        .stat_frames_rx(stat_frames_rx), .stat_frames_bad(stat_frames_bad), .stat_frames_tx(stat_frames_tx),
        .stat_retransmits(stat_retransmits));
    assign link_up = up;

    // tags of the device's own requests
    logic           tag_free, tag_take, np_down, np_down_ready;
    logic [TGL-1:0] tag_idx, tag_take_idx;
    logic [9:0]     tag_ltag, np_down_tag, q_wtag, q_ltag, syn_ltag;
    logic [15:0]    tag_lreq, np_down_req, q_req, q_lreq, syn_lreq;
    logic [12:0]    tag_bytes, np_down_bytes, q_rem, syn_bytes;
    logic           q_hit, q_done, q_last, q_drop, syn_valid, syn_ready;
    logic [2:0]     syn_status;

    dxpu_ingest #(.RTX_SLOTS(RTX_SLOTS), .SLOT_BYTES(SLOT_BYTES), .NTAGS(NTAGS)) ingest (
        .clk(clk), .rst(rst), .up(up), .sess_init(sess_init), .sess_isn(sess_isn), .snd_una(snd_una),
        .peer_window(peer_window), .peer_maxtlp(peer_maxtlp), .peer_inf(peer_inf), .peer_lim(peer_lim), .peer_tag10(peer_tag10),
        .s_cc_tdata(s_axis_cc_tdata), .s_cc_tkeep(s_axis_cc_tkeep), .s_cc_tvalid(s_axis_cc_tvalid),
        .s_cc_tready(s_axis_cc_tready), .s_cc_tlast(s_axis_cc_tlast),
        .s_rq_tdata(s_axis_rq_tdata), .s_rq_tkeep(s_axis_rq_tkeep), .s_rq_tvalid(s_axis_rq_tvalid),
        .s_rq_tready(s_axis_rq_tready), .s_rq_tlast(s_axis_rq_tlast),
        .rtx_we(rtx_we), .rtx_waddr(rtx_waddr), .rtx_wdata(rtx_wdata), .snd_nxt(snd_nxt),
        .len_slot(rtx_len_slot), .len_q(rtx_len), .stalled(snd_stalled),
        .tag_free(tag_free), .tag_idx(tag_idx), .tag_take(tag_take), .tag_take_idx(tag_take_idx),
        .tag_ltag(tag_ltag), .tag_lreq(tag_lreq),
        .tag_bytes(tag_bytes), .np_down(np_down), .np_down_tag(np_down_tag), .np_down_req(np_down_req),
        .np_down_bytes(np_down_bytes), .np_down_ready(np_down_ready));

    dxpu_tags #(.NTAGS(NTAGS), .CPL_TIMEOUT_US(CPL_TIMEOUT_US), .TICK_US(TICK_US)) tags (
        .clk(clk), .rst(rst), .tick_us(tick_us), .up(up), .peer_tag10(peer_tag10),
        .tag_free(tag_free), .tag_idx(tag_idx), .tag_take(tag_take), .tag_take_idx(tag_take_idx),
        .tag_ltag(tag_ltag), .tag_lreq(tag_lreq),
        .tag_bytes(tag_bytes), .np_down(np_down), .np_down_tag(np_down_tag), .np_down_req(np_down_req),
        .np_down_bytes(np_down_bytes), .np_down_ready(np_down_ready),
        .q_wtag(q_wtag), .q_req(q_req), .q_hit(q_hit), .q_ltag(q_ltag), .q_lreq(q_lreq), .q_done(q_done),
        .q_last(q_last), .q_rem(q_rem), .q_drop(q_drop),
        .syn_valid(syn_valid), .syn_ltag(syn_ltag), .syn_lreq(syn_lreq), .syn_bytes(syn_bytes),
        .syn_status(syn_status), .syn_ready(syn_ready));

    dxpu_deliver #(.RX_SLOTS(RX_SLOTS), .SLOT_BYTES(SLOT_BYTES)) deliver (
        .clk(clk), .rst(rst), .nxt_slot(rx_nxt_slot), .del_slot(rx_del_slot), .del_len(rx_del_len),
        .raddr(rxb_raddr), .rdata(rxb_rdata),
        .m_cq_tdata(m_axis_cq_tdata), .m_cq_tkeep(m_axis_cq_tkeep), .m_cq_tvalid(m_axis_cq_tvalid),
        .m_cq_tready(m_axis_cq_tready), .m_cq_tlast(m_axis_cq_tlast),
        .m_rc_tdata(m_axis_rc_tdata), .m_rc_tkeep(m_axis_rc_tkeep), .m_rc_tvalid(m_axis_rc_tvalid),
        .m_rc_tready(m_axis_rc_tready), .m_rc_tlast(m_axis_rc_tlast),
        .q_wtag(q_wtag), .q_req(q_req), .q_hit(q_hit), .q_ltag(q_ltag), .q_lreq(q_lreq), .q_done(q_done),
        .q_last(q_last), .q_rem(q_rem), .q_drop(q_drop),
        .rel_valid(rel_valid), .rel_np(rel_np), .rel_units(rel_units),
        .syn_valid(syn_valid), .syn_ltag(syn_ltag), .syn_lreq(syn_lreq), .syn_bytes(syn_bytes),
        .syn_status(syn_status), .syn_ready(syn_ready));
endmodule
