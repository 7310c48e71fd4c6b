package host

// call is one blocking request of the CPU (a config or MMIO access it
// waits for): the result, and the callbacks that fill it in and that the
// driver polls, made once per call object. Call objects are recycled, so
// a blocking access allocates nothing.
type call struct {
	done bool
	val  uint32
	err  error
	// Method values, made once.
	gotWord  func(v uint32, err error)
	gotErr   func(err error)
	gotBytes func(b []byte, err error)
	waiting  func() bool
}

func (c *call) setWord(v uint32, err error) { c.val, c.err, c.done = v, err, true }
func (c *call) setErr(err error)            { c.err, c.done = err, true }

// setBytes keeps the first four bytes (little-endian) of an MMIO read.
func (c *call) setBytes(b []byte, err error) {
	var w [4]byte
	copy(w[:], b)
	c.val = uint32(w[0]) | uint32(w[1])<<8 | uint32(w[2])<<16 | uint32(w[3])<<24
	c.err, c.done = err, true
}

func (c *call) pending() bool { return !c.done }

// callPool holds the call objects not in use (more than one is in use
// when a blocking call runs inside a callback of another).
type callPool struct{ free []*call }

func (p *callPool) get() *call {
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		return c
	}
	c := &call{}
	c.gotWord, c.gotErr, c.gotBytes, c.waiting = c.setWord, c.setErr, c.setBytes, c.pending
	return c
}

// put recycles c once it is done; a call abandoned before its answer
// (the simulation stalled) may still be answered later, so it is left to
// the garbage collector.
func (p *callPool) put(c *call) {
	if !c.done {
		return
	}
	c.done, c.val, c.err = false, 0, nil
	p.free = append(p.free, c)
}
