// dxpu_mac_rx: takes Ethernet frames from the MAC's 64-bit AXI-Stream into
// two frame buffers (one block RAM): one frame arrives while the engine
// parses the other; the stream is held (tready low) only when both are
// full. A frame longer than a buffer is kept truncated and flagged, and the
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
    logic [1:0]   full, over;
    logic [LW-1:0] flen [2];
    logic         wbuf, rbuf;     // buffer being written, buffer the engine reads

    assign s_tready = !full[wbuf];
    assign frame_valid = full[rbuf];
    assign frame_trunc = over[rbuf];
    assign frame_len = flen[rbuf];

    logic fire;
    assign fire = s_tvalid && s_tready;

    logic [3:0] nkeep;
    always_comb begin
        nkeep = 4'd0;
        for (int i = 0; i < 8; i++) nkeep = nkeep + {3'b0, s_tkeep[i]};
    end

    dxpu_ram #(.WIDTH(64), .DEPTH(2 * WORDS)) ram (
        .clk(clk), .we(fire && !wptr[WAW]), .wbe(8'hff), .waddr({wbuf, wptr[WAW-1:0]}), .wdata(s_tdata),
        .raddr({rbuf, raddr}), .rdata(rdata));

    always_ff @(posedge clk) begin
        if (rst) begin
            wptr <= '0;
            full <= 2'b00;
            over <= 2'b00;
            wbuf <= 1'b0;
            rbuf <= 1'b0;
            flen[0] <= '0;
            flen[1] <= '0;
        end else begin
            if (frame_done && full[rbuf]) begin
                full[rbuf] <= 1'b0;
                rbuf <= !rbuf;
            end
            if (fire) begin
                if (wptr[WAW]) over[wbuf] <= 1'b1;
                if (s_tlast) begin
                    full[wbuf] <= 1'b1;
                    flen[wbuf] <= wptr[WAW] ? LW'(FRAME_BYTES) : {wptr[WAW-1:0], 3'b000} + LW'(nkeep);
                    wbuf <= !wbuf;
                    wptr <= '0;
                end else if (!wptr[WAW]) begin
                    wptr <= wptr + 1'b1;
                end
                if (wptr == '0) over[wbuf] <= 1'b0;   // a new frame in this buffer
            end
        end
    end
endmodule
