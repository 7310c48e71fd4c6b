package cuda

// hostWait is a host thread waiting to see the 8-byte word at addr reach
// value (or its device lost): a spinning CPU re-checks after each write to
// the word (PollDelay later), a blocked thread when an MSI wakes it. Waits
// are recycled once fired and no longer referenced by the world (a watch,
// a scheduled re-check, an MSI slot, the spinner list: refs), with their
// method values made once, so waiting allocates nothing.
type hostWait struct {
	c           *Context
	addr, value uint64
	dev         *Device
	fn          func()
	fired       bool
	spun        bool // joined the spinner list (once per wait)
	refs        int
	checkF      func()
	watchedF    func()
	recheckF    func()
	msiF        func()
}

func (c *Context) newWait() *hostWait {
	if n := len(c.waits); n > 0 {
		w := c.waits[n-1]
		c.waits = c.waits[:n-1]
		return w
	}
	w := &hostWait{c: c}
	w.checkF, w.watchedF, w.recheckF, w.msiF = w.check, w.watched, w.recheck, w.msi
	return w
}

// release recycles w once it fired and nothing refers to it.
func (w *hostWait) release() {
	if !w.fired || w.refs > 0 {
		return
	}
	w.fn, w.dev, w.fired, w.spun = nil, nil, false, false
	w.c.waits = append(w.c.waits, w)
}

func (w *hostWait) ready() bool {
	return w.c.rc.Mem.Uint64(w.addr) >= w.value || w.dev.lost || w.dev.fault != nil
}

// check runs fn if the host sees the word ready, else waits again.
func (w *hostWait) check() {
	if w.fired {
		return
	}
	c := w.c
	if w.ready() {
		w.fired = true
		fn := w.fn
		w.fn = nil
		fn()
		w.release()
		return
	}
	if c.cfg.Sync == SyncBlocking {
		w.refs++
		c.msiWait = append(c.msiWait, w.msiF)
		return
	}
	if !w.spun {
		w.spun = true
		c.addSpinner(w)
	}
	w.refs++
	c.rc.Watch(w.addr, w.watchedF)
}

// watched runs at a write to the word: the spinning CPU sees it
// PollDelay later.
func (w *hostWait) watched() { w.c.s.After(w.c.cfg.PollDelay, w.recheckF) }

func (w *hostWait) recheck() {
	w.refs--
	w.check()
	w.release()
}

func (w *hostWait) msi() {
	w.refs--
	w.check()
	w.release()
}

// whenSeen calls fn once the host sees the word at addr reach value, or
// dev lost or faulted. fn runs once, in simulator context.
func (c *Context) whenSeen(addr, value uint64, dev *Device, fn func()) {
	w := c.newWait()
	w.addr, w.value, w.dev, w.fn = addr, value, dev, fn
	w.check()
}

// addSpinner registers a spinning wait so that wakeSpinners can end it,
// dropping finished waiters so the list stays as short as the live ones.
func (c *Context) addSpinner(w *hostWait) {
	if len(c.spinWait) >= 64 {
		live := c.spinWait[:0]
		var gone []*hostWait
		for _, x := range c.spinWait {
			if !x.fired {
				live = append(live, x)
			} else {
				gone = append(gone, x)
			}
		}
		clear(c.spinWait[len(live):])
		c.spinWait = live
		for _, x := range gone {
			x.refs--
			x.release()
		}
	}
	w.refs++
	c.spinWait = append(c.spinWait, w)
}

// wakeSpinners ends the spinning waits that are ready (after a device was
// lost or faulted): those still waiting keep their watch and their place
// in the list, so that a later loss or fault ends them too.
func (c *Context) wakeSpinners() {
	ws := c.spinWait
	c.spinWait = nil
	var keep []*hostWait
	for _, w := range ws {
		if !w.fired && !w.ready() {
			keep = append(keep, w)
			continue
		}
		w.refs--
		if !w.fired {
			w.check()
		}
		w.release()
	}
	c.spinWait = append(c.spinWait, keep...)
}

// wakeMSI runs the waits an MSI wakes.
func (c *Context) wakeMSI() {
	ws := c.msiWait
	c.msiWait, c.msiSpare = c.msiSpare, nil
	for _, fn := range ws {
		fn()
	}
	clear(ws)
	c.msiSpare = ws[:0]
}

// flag is a blocked host thread's "done": set by a callback, polled by
// the driver, both method values made once.
type flag struct {
	set    bool
	setF   func()
	unsetF func() bool
}

func (f *flag) doSet()        { f.set = true }
func (f *flag) isUnset() bool { return !f.set }

func (c *Context) newFlag() *flag {
	if n := len(c.flags); n > 0 {
		f := c.flags[n-1]
		c.flags = c.flags[:n-1]
		return f
	}
	f := &flag{}
	f.setF, f.unsetF = f.doSet, f.isUnset
	return f
}

// putFlag recycles f once set; one never set may still be set later
// (the wait stalled) and is left to the garbage collector.
func (c *Context) putFlag(f *flag) {
	if f.set {
		f.set = false
		c.flags = append(c.flags, f)
	}
}
