// dxpu_mac_tx: sends the frame the engine built in the transmit buffer
// (block RAM, written a byte at a time) on the MAC's 64-bit AXI-Stream,
// one beat per cycle.
module dxpu_mac_tx #(
    parameter int FRAME_BYTES = 2048,
    localparam int WORDS = FRAME_BYTES / 8,
    localparam int WAW = $clog2(WORDS),
    localparam int LW = $clog2(FRAME_BYTES) + 1
) (
    input  logic          clk,
    input  logic          rst,
    // byte write port (the engine builds the frame)
    input  logic          bwe,
    input  logic [LW-2:0] baddr,
    input  logic [7:0]    bdata,
    input  logic          start,       // send len bytes from the buffer
    input  logic [LW-1:0] len,
    output logic          busy,
    output logic [63:0]   m_tdata,
    output logic [7:0]    m_tkeep,
    output logic          m_tvalid,
    input  logic          m_tready,
    output logic          m_tlast
);
    logic [WAW-1:0] beat, last_beat;
    logic [2:0]     last_bytes;      // bytes in the last beat, 0 = 8
    logic           active;
    logic           fire;

    assign busy = active;
    assign fire = m_tvalid && m_tready;
    assign m_tvalid = active;
    assign m_tlast = active && beat == last_beat;
    always_comb begin
        m_tkeep = 8'hff;
        if (m_tlast && last_bytes != 3'd0) m_tkeep = 8'hff >> (4'd8 - {1'b0, last_bytes});
    end

    // Read address runs one ahead on a beat so the RAM's output is always
    // the current beat.
    logic [WAW-1:0] raddr;
    assign raddr = (fire && !m_tlast) ? beat + 1'b1 : beat;

    logic [63:0] wdata;
    logic [7:0]  wbe;
    assign wdata = {8{bdata}};
    assign wbe = 8'h01 << baddr[2:0];

    dxpu_ram #(.WIDTH(64), .DEPTH(WORDS)) ram (
        .clk(clk), .we(bwe), .wbe(wbe), .waddr(baddr[LW-2:3]), .wdata(wdata),
        .raddr(raddr), .rdata(m_tdata));

    /* verilator lint_off UNUSEDSIGNAL */
    logic [LW-1:0] lm1;   // only its word index is used
    /* verilator lint_on UNUSEDSIGNAL */
    assign lm1 = len - 1'b1;

    always_ff @(posedge clk) begin
        if (rst) begin
            active <= 1'b0;
            beat <= '0;
            last_beat <= '0;
            last_bytes <= '0;
        end else if (!active) begin
            beat <= '0;
            if (start) begin
                active <= 1'b1;
                last_beat <= lm1[LW-2:3];
                last_bytes <= len[2:0];
            end
        end else if (fire) begin
            if (m_tlast) begin
                active <= 1'b0;
                beat <= '0;
            end else begin
                beat <= beat + 1'b1;
            end
        end
    end
endmodule
