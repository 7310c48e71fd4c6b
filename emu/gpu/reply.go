package gpu

// reply is a set of TLPs the GPU sends after RegLatency: the completions
// of one config or MMIO read. Replies are recycled, each with its send
// method value made once, so answering a read allocates nothing.
type reply struct {
	g     *GPU
	buf   []byte // the TLPs, back to back
	lens  []int  // length of each
	sendF func()
}

// newReply returns an empty reply from the free list.
func (g *GPU) newReply() *reply {
	if n := len(g.replies); n > 0 {
		r := g.replies[n-1]
		g.replies = g.replies[:n-1]
		return r
	}
	r := &reply{g: g}
	r.sendF = r.send
	return r
}

// add appends one TLP built by the caller at the end of r.buf: pass
// r.buf as the builder's dst.
func (r *reply) add(b []byte) {
	r.lens = append(r.lens, len(b)-len(r.buf))
	r.buf = b
}

// later sends r after the GPU's register latency.
func (r *reply) later() { r.g.s.After(r.g.cfg.RegLatency, r.sendF) }

func (r *reply) send() {
	off := 0
	for _, n := range r.lens {
		r.g.send(r.buf[off : off+n : off+n])
		off += n
	}
	r.buf, r.lens = r.buf[:0], r.lens[:0]
	r.g.replies = append(r.g.replies, r)
}
