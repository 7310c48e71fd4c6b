// dxpu_mac_rx: takes one Ethernet frame at a time from the MAC's 64-bit
// AXI-Stream into a frame buffer (block RAM) for the engine to parse; the
// stream is held (tready low) until the engine releases the buffer. A
// frame longer than the buffer is kept truncated and flagged, and the
// engine drops it.
module dxpu_mac_rx #(
    parameter int FRAME_BYTES = 2048,
    localparam int WORDS = FRAME_BYTES / 8,
    localparam int WAW = $clog2(WORDS),
    localparam int LW = $clog2(FRAME_BYTES) + 1
) (
    input  logic           clk,
    input  logic           rst,
    input  logic [63:0]    s_tdata,
    input  logic [7:0]     s_tkeep,
    input  logic           s_tvalid,
    output logic           s_tready,
    input  logic           s_tlast,
    output logic           frame_valid,   // a whole frame is in the buffer
    output logic [LW-1:0]  frame_len,     // its length in bytes
    output logic           frame_trunc,   // it was longer than the buffer
    input  logic           frame_done,    // the engine is done with it
    input  logic [WAW-1:0] raddr,
    output logic [63:0]    rdata
);
    logic [WAW:0] wptr;
    logic         full, over;

    assign s_tready = !full;
    assign frame_valid = full;
    assign frame_trunc = over;

    logic fire;
    assign fire = s_tvalid && s_tready;

    logic [3:0] nkeep;
    always_comb begin
        nkeep = 4'd0;
        for (int i = 0; i < 8; i++) nkeep = nkeep + {3'b0, s_tkeep[i]};
    end

    dxpu_ram #(.WIDTH(64), .DEPTH(WORDS)) ram (
        .clk(clk), .we(fire && !wptr[WAW]), .wbe(8'hff), .waddr(wptr[WAW-1:0]), .wdata(s_tdata),
        .raddr(raddr), .rdata(rdata));

    always_ff @(posedge clk) begin
        if (rst) begin
            wptr <= '0;
            full <= 1'b0;
            over <= 1'b0;
            frame_len <= '0;
        end else if (full) begin
            if (frame_done) begin
                full <= 1'b0;
                wptr <= '0;
                over <= 1'b0;
            end
        end else if (fire) begin
            if (wptr[WAW]) over <= 1'b1;
            if (s_tlast) begin
                full <= 1'b1;
                frame_len <= wptr[WAW] ? LW'(FRAME_BYTES) : {wptr[WAW-1:0], 3'b000} + LW'(nkeep);
            end else if (!wptr[WAW]) begin
                wptr <= wptr + 1'b1;
            end
        end
    end
endmodule
