package main

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// This file is every call of the ABI on Go values: export.go converts the
// C arguments (pointers become slices over the caller's memory, never kept)
// and calls these. Each returns a DXPU_* code.

// call runs f on the bridge named id with its lock held. A panic in f (a
// bug) is contained: the handle is marked broken and the call fails with
// codeInternal rather than taking the host program down.
func call(id int64, f func(h *handle) int) (code int) {
	h := bridges.get(id)
	if h == nil {
		return codeHandle
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.dead:
		return codeHandle
	case h.broken:
		return codeInternal
	}
	defer func() {
		if p := recover(); p != nil {
			h.broken = true
			code = h.fail(codeInternal, fmt.Errorf("contained panic: %v", p))
		}
	}()
	code = f(h)
	h.noteKeys()
	return code
}

// fail records the failure for dxpu_bridge_last_error and returns code.
func (h *handle) fail(code int, err error) int {
	h.code, h.err = code, err
	return code
}

// failErr records a bridge error, if any, and returns its code.
func (h *handle) failErr(err error) int {
	if err == nil {
		return codeOK
	}
	return h.fail(codeOf(err), err)
}

// advance moves the handle's clock to now, refusing to go back.
func (h *handle) advance(now time.Duration) bool {
	if now < h.now {
		h.fail(codeTime, fmt.Errorf("now_ns %d is before %d, a time already passed", int64(now), int64(h.now)))
		return false
	}
	h.now = now
	return true
}

// opNew builds a bridge for cfg and registers it.
func opNew(cfg bridge.Config) (id int64, code int, err error) {
	defer func() {
		if p := recover(); p != nil {
			id, code, err = 0, codeInternal, fmt.Errorf("contained panic building the bridge: %v", p)
		}
	}()
	b, err := bridge.New(cfg)
	if err != nil {
		return 0, codeOf(err), err
	}
	c := b.Config()
	h := &handle{
		b:     b,
		now:   noTime,
		frame: make([]byte, c.MTU),
		tlp:   make([]byte, tlp.Header4DW+c.MaxPayload+4),
	}
	id, err = bridges.add(h)
	if err != nil {
		return 0, codeLimit, err
	}
	return id, codeOK, nil
}

// opFree unregisters and releases the bridge.
func opFree(id int64) int {
	h := bridges.remove(id)
	if h == nil {
		return codeHandle
	}
	h.mu.Lock()
	h.dead, h.b = true, nil
	h.mu.Unlock()
	return codeOK
}

// opHandleFrame feeds one frame from the fabric.
func opHandleFrame(id int64, now time.Duration, frame []byte) int {
	return call(id, func(h *handle) int {
		if !h.advance(now) {
			return codeTime
		}
		return h.failErr(h.b.HandleFrame(now, frame))
	})
}

// opNextFrame writes the next frame into buf: codeMore and its length,
// codeOK and 0 when none is due, codeShort and the length needed.
func opNextFrame(id int64, now time.Duration, buf []byte) (n int, code int) {
	code = call(id, func(h *handle) int {
		if !h.advance(now) {
			return codeTime
		}
		if h.frameN == 0 {
			if len(buf) >= len(h.frame) {
				// The common case: straight into the caller's buffer.
				if n = h.b.NextFrame(now, buf); n == 0 {
					return codeOK
				}
				return codeMore
			}
			if h.frameN = h.b.NextFrame(now, h.frame); h.frameN == 0 {
				return codeOK
			}
		}
		if h.frameN > len(buf) {
			n = h.frameN
			return h.fail(codeShort, fmt.Errorf("next frame is %d bytes, buffer holds %d", h.frameN, len(buf)))
		}
		n = copy(buf, h.frame[:h.frameN])
		h.frameN = 0
		return codeMore
	})
	return n, code
}

// opSendTLP hands a TLP from the local PCIe side to the bridge.
func opSendTLP(id int64, now time.Duration, t []byte) int {
	return call(id, func(h *handle) int {
		if !h.advance(now) {
			return codeTime
		}
		return h.failErr(h.b.HandleTLP(now, t))
	})
}

// opNextTLP writes the next TLP for the local side among the classes in
// accept into buf, as opNextFrame does frames. A TLP held back for a short
// buffer is returned first, and nothing else while accept excludes its
// class (what follows it may not pass it).
func opNextTLP(id int64, accept uint32, buf []byte) (n int, code int) {
	code = call(id, func(h *handle) int {
		if accept&^uint32(bridge.AcceptAll) != 0 {
			return h.fail(codeInval, fmt.Errorf("accept mask %#x has bits beyond DXPU_ACCEPT_ALL", accept))
		}
		if h.tlpN == 0 {
			v, ok := h.b.NextTLP(bridge.ClassMask(accept))
			if !ok {
				return codeOK
			}
			if len(v) <= len(buf) {
				n = copy(buf, v)
				return codeMore
			}
			if len(v) > len(h.tlp) {
				return h.fail(codeInternal, fmt.Errorf("delivered TLP of %d bytes exceeds the %d-byte maximum", len(v), len(h.tlp)))
			}
			h.tlpN = copy(h.tlp, v)
		}
		held := tlp.View(h.tlp[:h.tlpN])
		if accept&(1<<held.Class()) == 0 {
			return codeOK
		}
		if h.tlpN > len(buf) {
			n = h.tlpN
			return h.fail(codeShort, fmt.Errorf("next TLP is %d bytes, buffer holds %d", h.tlpN, len(buf)))
		}
		n = copy(buf, held)
		h.tlpN = 0
		return codeMore
	})
	return n, code
}

// opRelease returns credits of consumed TLPs.
func opRelease(id int64, cls, headers, data uint32) int {
	return call(id, func(h *handle) int {
		if cls >= uint32(bridge.NumClasses) {
			return h.fail(codeInval, fmt.Errorf("class %d: want 0 (posted), 1 (non-posted) or 2 (completion)", cls))
		}
		if headers > 1<<30 || data > 1<<30 {
			return h.fail(codeRelease, fmt.Errorf("%w: %d headers, %d data units", bridge.ErrRelease, headers, data))
		}
		return h.failErr(h.b.Release(tlp.Class(cls), int(headers), int(data)))
	})
}

// opNextEvent hands the next event to fill, with its key generation (key
// events only): codeMore, or codeOK if none. The bridge's events come
// first, then the key events seen by the end of the last call.
func opNextEvent(id int64, fill func(e *bridge.Event, gen uint32)) int {
	return call(id, func(h *handle) int {
		if ev, ok := h.b.NextEvent(); ok {
			fill(&ev, 0)
			return codeMore
		}
		if len(h.keys.events) == 0 {
			return codeOK
		}
		k := h.keys.events[0]
		h.keys.events = append(h.keys.events[:0], h.keys.events[1:]...)
		fill(&bridge.Event{Kind: k.kind, At: k.at, Count: int(k.epoch)}, k.gen)
		return codeMore
	})
}

// opDeadline returns when the timers must next run.
func opDeadline(id int64) (d time.Duration, code int) {
	code = call(id, func(h *handle) int {
		d = h.b.Deadline()
		return codeOK
	})
	return d, code
}

// opOnTimer runs the timers due at now.
func opOnTimer(id int64, now time.Duration) int {
	return call(id, func(h *handle) int {
		if !h.advance(now) {
			return codeTime
		}
		h.b.HandleTimeout(now)
		return codeOK
	})
}

// opReset ends the session on purpose.
func opReset(id int64, now time.Duration) int {
	return call(id, func(h *handle) int {
		if !h.advance(now) {
			return codeTime
		}
		h.b.Reset(now)
		return codeOK
	})
}

// opState returns the link state.
func opState(id int64) (s bridge.State, code int) {
	code = call(id, func(h *handle) int {
		s = h.b.State()
		return codeOK
	})
	return s, code
}

// opCounters returns the statistics.
func opCounters(id int64) (c bridge.Counters, code int) {
	code = call(id, func(h *handle) int {
		c = h.b.Counters()
		return codeOK
	})
	return c, code
}

// opLastError returns the latest failure recorded on the handle.
func opLastError(id int64) (code int, msg string) {
	h := bridges.get(id)
	if h == nil {
		return codeHandle, ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead {
		return codeHandle, ""
	}
	if h.err == nil {
		return codeOK, ""
	}
	return h.code, h.err.Error()
}

// tlpCredits returns what a TLP costs in flow-control credits.
func tlpCredits(t []byte) (cls tlp.Class, headers, data int, code int, err error) {
	v, err := tlp.Parse(t)
	if err != nil {
		return 0, 0, 0, codeTLP, fmt.Errorf("%w: %w", bridge.ErrMalformedTLP, err)
	}
	cls, headers, data = v.Credits()
	return cls, headers, data, codeOK, nil
}
