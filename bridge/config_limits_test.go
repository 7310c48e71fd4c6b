package bridge

import (
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// defaultsWithin is c.Defaults(), failing t if it has not returned within
// ten seconds (it looped for ever on a Window above 1<<62).
func defaultsWithin(t *testing.T, c Config) Config {
	t.Helper()
	done := make(chan Config, 1)
	go func() { done <- c.Defaults() }()
	select {
	case d := <-done:
		return d
	case <-time.After(10 * time.Second):
		t.Fatalf("Defaults with Window %d, TxQueue %d, MTU %d, MaxPayload %d: no return in 10s", c.Window, c.TxQueue, c.MTU, c.MaxPayload)
		return Config{}
	}
}

// largest is the largest config Validate accepts: every TLP count and the
// TLP size at their maximum, each class infinite (InfiniteQueue deep) or
// offering every header credit.
func largest(infinite bool) Config {
	c := Config{Role: RoleHost, PairID: 1, MTU: 65535, MaxPayload: 4096, Window: MaxWindow, TxQueue: maxQueue, InfiniteQueue: maxQueue}
	for i := range c.Credits {
		c.Credits[i] = ClassCredits{Headers: MaxHeaderCredits, Data: 1 << 30}
		if infinite {
			c.Credits[i].Headers = 0
		}
	}
	return c
}

// protocolBytes bounds the TLP buffers of any config Validate accepts: a
// window and three class queues to send, a window and three class
// buffers to receive, each of 1<<15 TLPs (all that a HELLO's 16-bit
// window and credit fields let the wire use) of the largest TLP.
const protocolBytes = 8 << 15 * (16 + 4096 + 4)

// TestWindowAboveLargestRefused: a Window above the largest (1<<15, what a
// HELLO's 16 bits announce as a power of two) is ErrConfig naming Window
// and the value given, not rounded first: Defaults doubled a window up to
// one above it, which for a Window above 1<<62 overflowed to 0 and never
// returned. At most the largest, it rounds up as before.
func TestWindowAboveLargestRefused(t *testing.T) {
	t.Parallel()
	for _, w := range []int{MaxWindow + 1, 1 << 16, 1 << 40, 1<<62 + 1, math.MaxInt} {
		c := Config{Role: RoleHost, PairID: 1, Window: w}
		if d := defaultsWithin(t, c); d.Window != w {
			t.Errorf("Window %d: Defaults made it %d", w, d.Window)
		}
		_, err := New(c)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "Window" || !strings.Contains(err.Error(), "Window: "+strconv.Itoa(w)+": want 1..32768") {
			t.Errorf("Window %d: %v, want ErrConfig naming Window, the value and 32768", w, err)
		}
	}
	for w, want := range map[int]int{1: 1, 3: 4, 200: 256, MaxWindow - 1: MaxWindow, MaxWindow: MaxWindow} {
		if d := defaultsWithin(t, Config{Window: w}); d.Window != want {
			t.Errorf("Window %d: rounded to %d, want %d", w, d.Window, want)
		}
	}
}

// TestTLPCountsBoundedByProtocol: every TLP count New allocates a buffer
// for is refused above what the wire can use, naming its field and the
// limit; TxQueue and InfiniteQueue took 65536, twice that, and brought
// New's buffers to 1.9 GB. The largest config accepted stays within
// protocolBytes (1.08 GB at MaxPayload 4096).
func TestTLPCountsBoundedByProtocol(t *testing.T) {
	t.Parallel()
	for field, set := range map[string]func(*Config){
		"TxQueue":       func(c *Config) { c.TxQueue = maxQueue + 1 },
		"InfiniteQueue": func(c *Config) { c.InfiniteQueue = maxQueue + 1 },
		"Credits":       func(c *Config) { c.Credits[1].Headers = MaxHeaderCredits + 1 },
	} {
		c := largest(false)
		set(&c)
		d := defaultsWithin(t, c)
		err := d.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != field || !strings.Contains(err.Error(), "32768") {
			t.Errorf("%s above 32768: %v, want ErrConfig naming %s and the limit", field, err, field)
		}
	}
	for _, infinite := range []bool{false, true} {
		d := defaultsWithin(t, largest(infinite))
		if err := d.Validate(); err != nil {
			t.Fatalf("the largest config (infinite credits %v): %v", infinite, err)
		}
		tx, rx := d.poolSlots()
		if b := (tx + rx) * d.maxTLP(); b > protocolBytes {
			t.Errorf("the largest config (infinite credits %v): %d TLP buffers, %d bytes; want at most %d", infinite, tx+rx, b, protocolBytes)
		}
	}
}

// allocated is what New(c) allocates, in bytes.
func allocated(t *testing.T, c Config) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := New(c)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runtime.KeepAlive(b)
	return after.TotalAlloc - before.TotalAlloc
}

// newOverhead bounds what New allocates beside its TLP buffers: per
// buffer its queue entry and index, and the tag tables, keys and
// completion queue of every bridge.
func newOverhead(tx, rx int) uint64 { return uint64(256*(tx+rx)) + 1<<20 }

// TestNewAllocatesItsPools: what New allocates is its poolSlots' TLP
// buffers and little more, so that the bound on poolSlots (above, and in
// FuzzConfig) bounds New's memory. Not parallel: it reads the process's
// allocation counters.
func TestNewAllocatesItsPools(t *testing.T) {
	for _, c := range []Config{
		{Role: RoleHost, PairID: 1},
		{Role: RoleGPU, PairID: 1, MaxPayload: 1024, MTU: 9000, Window: 4096, TxQueue: 2048, InfiniteQueue: 2048,
			Credits: [NumClasses]ClassCredits{{0, 1 << 20}, {4096, 1 << 20}, {0, 0}}},
		{Role: RoleHost, PairID: 1, MaxPayload: 4096, MTU: 9000, Window: 1024, TxQueue: 1024,
			Credits: [NumClasses]ClassCredits{{1024, 1 << 20}, {1024, 1 << 20}, {1024, 1 << 20}}},
	} {
		d := c.Defaults()
		tx, rx := d.poolSlots()
		pools := uint64((tx + rx) * d.maxTLP())
		if got := allocated(t, c); got < pools || got > pools+newOverhead(tx, rx) {
			t.Errorf("New with Window %d, TxQueue %d, credits %v: allocated %d bytes, want %d (%d TLP buffers of %d) and at most %d more",
				d.Window, d.TxQueue, d.Credits, got, pools, tx+rx, d.maxTLP(), newOverhead(tx, rx))
		}
	}
}

// FuzzConfig: for any values of the fields that size the bridge and its
// timers, Defaults returns (it hung on a Window above 1<<62) and Validate
// neither panics nor fails without naming a field; a config it accepts has
// a power-of-two window and TLP buffers within what the protocol can use
// (protocolBytes), and New, where those are small, succeeds allocating
// little more than them.
func FuzzConfig(f *testing.F) {
	f.Add(0, 0, 0, 0, 0, 0, 0, 0, int64(0))
	f.Add(256, 64, 64, 1472, 512, 64, 2048, 8, int64(time.Millisecond))
	f.Add(MaxWindow, maxQueue, maxQueue, 65535, 4096, 0, 1<<30, 10, int64(time.Second))
	f.Add(1<<62+1, 1<<16, 1<<16, 1<<20, 1<<20, 1<<15+1, 1<<31, 9, int64(-1))
	f.Add(math.MaxInt, math.MinInt, -1, -1, math.MaxInt, -1, -1, -1, int64(math.MinInt64))
	f.Add(3, 1, 1, 100, 64, 1, 4, 10, int64(1))
	f.Fuzz(func(t *testing.T, window, txQueue, infQueue, mtu, maxPayload, headers, data, tagBits int, timer int64) {
		c := Config{Role: RoleGPU, PairID: 1, Window: window, TxQueue: txQueue, InfiniteQueue: infQueue, MTU: mtu,
			MaxPayload: maxPayload, TagBits: tagBits, Keepalive: time.Duration(timer), AckDelay: time.Duration(timer)}
		c.Credits[1] = ClassCredits{Headers: headers, Data: data}
		d := defaultsWithin(t, c)
		err := d.Validate()
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field == "" || !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate: %v is not a ConfigError naming a field", err)
			}
			return
		}
		if d.Window&(d.Window-1) != 0 || d.Window > MaxWindow {
			t.Fatalf("Window %d accepted as %d", window, d.Window)
		}
		tx, rx := d.poolSlots()
		pools := (tx + rx) * d.maxTLP()
		if pools > protocolBytes {
			t.Fatalf("accepted with %d TLP buffers of %d bytes: %d, above %d", tx+rx, d.maxTLP(), pools, protocolBytes)
		}
		if pools > 8<<20 {
			return
		}
		if got := allocated(t, c); got > uint64(pools)+newOverhead(tx, rx) {
			t.Fatalf("New allocated %d bytes for %d TLP buffers of %d bytes", got, tx+rx, d.maxTLP())
		}
	})
}
