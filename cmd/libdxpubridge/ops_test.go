package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// newOp builds a bridge through the ABI's Go side and frees it after t.
func newOp(t testing.TB, cfg bridge.Config) int64 {
	t.Helper()
	id, code, err := opNew(cfg)
	if code != codeOK || err != nil || id <= 0 {
		t.Fatalf("opNew(%+v) = %d, %d, %v", cfg, id, code, err)
	}
	t.Cleanup(func() { opFree(id) })
	return id
}

// shuttleOps moves every due frame between a and b until both are quiet.
func shuttleOps(t testing.TB, a, b int64, now time.Duration, buf []byte) {
	for moved := true; moved; {
		moved = false
		for _, d := range [][2]int64{{a, b}, {b, a}} {
			for {
				n, code := opNextFrame(d[0], now, buf)
				if code == codeOK {
					break
				}
				if code != codeMore {
					t.Fatalf("next frame: %s", codeName(code))
				}
				if code := opHandleFrame(d[1], now, buf[:n]); code != codeOK {
					_, msg := opLastError(d[1])
					t.Fatalf("handle frame: %s: %s", codeName(code), msg)
				}
				moved = true
			}
		}
	}
}

// upPair returns a host and a GPU bridge that completed their handshake.
func upPair(t testing.TB, autoRelease bool) (host, gpu int64, now time.Duration) {
	t.Helper()
	host = newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 9, Seed: 1, AutoRelease: true})
	gpu = newOp(t, bridge.Config{Role: bridge.RoleGPU, PairID: 9, Seed: 2, AutoRelease: autoRelease})
	buf := make([]byte, 1472)
	for now = time.Microsecond; now < 10*time.Millisecond; now += 100 * time.Microsecond {
		shuttleOps(t, host, gpu, now, buf)
		hs, _ := opState(host)
		gs, _ := opState(gpu)
		if hs == bridge.StateUp && gs == bridge.StateUp {
			return host, gpu, now
		}
	}
	t.Fatal("no handshake in 10 ms of virtual time")
	return
}

// mwr returns a 4-DW memory write of n bytes at addr.
func mwr(addr uint64, n int) []byte {
	p := tlp.Packet{Kind: tlp.MWr, RequesterID: tlp.NewID(1, 0, 0), Address: addr, Data: make([]byte, n), FirstBE: 0xf, LastBE: 0xf}
	if n == 4 {
		p.LastBE = 0
	}
	for i := range p.Data {
		p.Data[i] = byte(i*7 + 1)
	}
	b, err := p.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func TestHandles(t *testing.T) {
	t.Parallel()
	id := newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 1})
	id2 := newOp(t, bridge.Config{Role: bridge.RoleGPU, PairID: 1})
	if id2 <= id {
		t.Errorf("handle %d after %d: handles must count up", id2, id)
	}
	if code := opFree(id); code != codeOK {
		t.Fatalf("free: %s", codeName(code))
	}
	buf := make([]byte, 2048)
	for name, code := range map[string]int{
		"free again":   opFree(id),
		"handle frame": opHandleFrame(id, 0, buf[:40]),
		"on timer":     opOnTimer(id, 0),
		"send tlp":     opSendTLP(id, 0, mwr(0x1000, 4)),
		"release":      opRelease(id, 0, 1, 1),
		"reset":        opReset(id, 0),
		"event":        opNextEvent(id, func(*bridge.Event, uint32) { t.Error("event from a freed bridge") }),
		"unknown 0":    opOnTimer(0, 0),
		"unknown -5":   opOnTimer(-5, 0),
	} {
		if code != codeHandle {
			t.Errorf("%s: %s, want DXPU_E_HANDLE", name, codeName(code))
		}
	}
	if _, code := opNextFrame(id, 0, buf); code != codeHandle {
		t.Errorf("next frame after free: %s", codeName(code))
	}
	if code, msg := opLastError(id); code != codeHandle || msg != "" {
		t.Errorf("last error after free: %s %q", codeName(code), msg)
	}
	if _, code, err := opNew(bridge.Config{Role: 7}); code != codeConfig || err == nil || !strings.Contains(err.Error(), "Role") {
		t.Errorf("bad role: %s, %v", codeName(code), err)
	}
}

func TestTimeNeverGoesBack(t *testing.T) {
	t.Parallel()
	id := newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 1})
	if code := opOnTimer(id, time.Millisecond); code != codeOK {
		t.Fatal(codeName(code))
	}
	before, _ := opCounters(id)
	buf := make([]byte, 2048)
	if _, code := opNextFrame(id, time.Millisecond-1, buf); code != codeTime {
		t.Errorf("next frame back in time: %s", codeName(code))
	}
	if code := opOnTimer(id, 0); code != codeTime {
		t.Errorf("timer back in time: %s", codeName(code))
	}
	if after, _ := opCounters(id); after != before {
		t.Errorf("a refused call changed the counters: %+v -> %+v", before, after)
	}
	if code, msg := opLastError(id); code != codeTime || !strings.Contains(msg, "before") {
		t.Errorf("last error %s %q", codeName(code), msg)
	}
	// Negative times are fine as long as they do not go back (any origin).
	id2 := newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 1})
	if n, code := opNextFrame(id2, -time.Hour, buf); code != codeMore || n == 0 {
		t.Errorf("first call at -1h: %s, %d bytes", codeName(code), n)
	}
}

func TestShortFrameBufferKeepsTheFrame(t *testing.T) {
	t.Parallel()
	ref := newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 3, Seed: 5})
	id := newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 3, Seed: 5})
	full := make([]byte, 1472)
	want, code := opNextFrame(ref, 0, full)
	if code != codeMore {
		t.Fatal(codeName(code))
	}
	need, code := opNextFrame(id, 0, nil)
	if code != codeShort || need != want {
		t.Fatalf("nil buffer: %s, need %d (frame is %d)", codeName(code), need, want)
	}
	if n, code := opNextFrame(id, 0, make([]byte, need-1)); code != codeShort || n != need {
		t.Fatalf("one byte short: %s, %d", codeName(code), n)
	}
	got := make([]byte, need) // smaller than the MTU: the staged copy
	if n, code := opNextFrame(id, 0, got); code != codeMore || n != need || !bytes.Equal(got, full[:want]) {
		t.Fatalf("exact buffer: %s, %d bytes, equal %v", codeName(code), n, bytes.Equal(got, full[:want]))
	}
	if n, code := opNextFrame(id, 0, full); code != codeOK || n != 0 {
		t.Fatalf("nothing more due: %s, %d", codeName(code), n)
	}
}

func TestShortTLPBufferKeepsTheTLP(t *testing.T) {
	t.Parallel()
	host, gpu, now := upPair(t, false)
	w := mwr(0x2000, 64)
	if code := opSendTLP(host, now, w); code != codeOK {
		t.Fatal(codeName(code))
	}
	shuttleOps(t, host, gpu, now, make([]byte, 1472))
	if n, code := opNextTLP(gpu, uint32(bridge.AcceptAll), make([]byte, 10)); code != codeShort || n != len(w) {
		t.Fatalf("short: %s, %d", codeName(code), n)
	}
	// Held: a mask without its class gets nothing, not what follows it.
	if n, code := opNextTLP(gpu, uint32(bridge.AcceptNonPosted), make([]byte, 100)); code != codeOK || n != 0 {
		t.Fatalf("non-posted only: %s, %d", codeName(code), n)
	}
	if _, code := opNextTLP(gpu, 8, make([]byte, 100)); code != codeInval {
		t.Fatalf("mask 8: %s", codeName(code))
	}
	got := make([]byte, 200)
	n, code := opNextTLP(gpu, uint32(bridge.AcceptAll), got)
	if code != codeMore || !bytes.Equal(got[:n], w) {
		t.Fatalf("full: %s, % x", codeName(code), got[:n])
	}
	cls, hd, dc, code, err := tlpCredits(w)
	if code != codeOK || err != nil || cls != tlp.Posted || hd != 1 || dc != 4 {
		t.Fatalf("credits: %v %d %d %s %v", cls, hd, dc, codeName(code), err)
	}
	if code := opRelease(gpu, uint32(cls), uint32(hd), uint32(dc)); code != codeOK {
		t.Fatalf("release: %s", codeName(code))
	}
	if code := opRelease(gpu, uint32(cls), uint32(hd), uint32(dc)); code != codeRelease {
		t.Fatalf("release again: %s", codeName(code))
	}
	if code := opRelease(gpu, 3, 1, 1); code != codeInval {
		t.Fatalf("release class 3: %s", codeName(code))
	}
}

func TestGarbageFramesAreDroppedWithAReason(t *testing.T) {
	t.Parallel()
	host, gpu, now := upPair(t, true)
	before, _ := opCounters(gpu)
	for i, f := range [][]byte{nil, {0x17}, bytes.Repeat([]byte{0xff}, 40), bytes.Repeat([]byte{0x17}, 3000)} {
		if code := opHandleFrame(gpu, now, f); code != codeFrame {
			t.Errorf("frame %d: %s", i, codeName(code))
		}
	}
	code, msg := opLastError(gpu)
	if code != codeFrame || msg == "" {
		t.Errorf("last error %s %q", codeName(code), msg)
	}
	after, _ := opCounters(gpu)
	if after.FramesDropped != before.FramesDropped+4 {
		t.Errorf("frames dropped %d -> %d", before.FramesDropped, after.FramesDropped)
	}
	// The pair still works.
	if code := opSendTLP(host, now, mwr(0x3000, 16)); code != codeOK {
		t.Fatal(codeName(code))
	}
	shuttleOps(t, host, gpu, now, make([]byte, 1472))
	if _, code := opNextTLP(gpu, uint32(bridge.AcceptAll), make([]byte, 100)); code != codeMore {
		t.Fatalf("write after garbage: %s", codeName(code))
	}
	if _, _, _, code, err := tlpCredits([]byte{0xff, 0xff}); code != codeTLP || err == nil {
		t.Errorf("credits of garbage: %s %v", codeName(code), err)
	}
}

// TestPanicIsContained: a bridge in a state that makes a call panic (here
// a handle without one, which no caller can build) fails that call and
// every later one with DXPU_E_INTERNAL; the process goes on.
func TestPanicIsContained(t *testing.T) {
	t.Parallel()
	id, err := bridges.add(&handle{now: noTime})
	if err != nil {
		t.Fatal(err)
	}
	defer opFree(id)
	if code := opOnTimer(id, 0); code != codeInternal {
		t.Fatalf("call on a broken bridge: %s", codeName(code))
	}
	if code, msg := opLastError(id); code != codeInternal || !strings.Contains(msg, "panic") {
		t.Fatalf("last error %s %q", codeName(code), msg)
	}
	if _, code := opDeadline(id); code != codeInternal {
		t.Fatalf("next call: %s", codeName(code))
	}
	if code := opFree(id); code != codeOK {
		t.Fatalf("free of a broken bridge: %s", codeName(code))
	}
}

// TestHotPathAllocatesNothing: a TLP through the ABI's Go side, from
// send_tlp to next_tlp on the other bridge, allocates nothing.
func TestHotPathAllocatesNothing(t *testing.T) {
	host, gpu, now := upPair(t, true)
	w := mwr(0x4000, 256)
	frame, out := make([]byte, 1472), make([]byte, 512)
	allocs := testing.AllocsPerRun(200, func() {
		now += time.Microsecond
		moveOne(t, host, gpu, now, w, frame, out)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per TLP", allocs)
	}
}

// moveOne sends w from host, carries the frames and takes it at gpu.
func moveOne(t testing.TB, host, gpu int64, now time.Duration, w, frame, out []byte) {
	if code := opSendTLP(host, now, w); code != codeOK {
		t.Fatalf("send: %s", codeName(code))
	}
	shuttleOps(t, host, gpu, now, frame)
	if n, code := opNextTLP(gpu, uint32(bridge.AcceptAll), out); code != codeMore || n != len(w) {
		t.Fatalf("next tlp: %s, %d", codeName(code), n)
	}
}

func BenchmarkTLPThroughABI(b *testing.B) {
	host, gpu, now := upPair(b, true)
	w := mwr(0x4000, 256)
	frame, out := make([]byte, 1472), make([]byte, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		now += time.Microsecond
		moveOne(b, host, gpu, now, w, frame, out)
	}
}

// TestConcurrentCallsAndFree: calls on one handle from several goroutines,
// and a free in the middle of them, are serialized (go test -race checks
// the locking): each call returns a documented code, and once the free
// returned every call says DXPU_E_HANDLE.
func TestConcurrentCallsAndFree(t *testing.T) {
	t.Parallel()
	id, code, err := opNew(bridge.Config{Role: bridge.RoleHost, PairID: 2})
	if code != codeOK {
		t.Fatal(err)
	}
	start := make(chan struct{})
	results := make(chan int, 4*200)
	for g := range 4 {
		go func() {
			buf := make([]byte, 1472)
			<-start
			for i := range 200 {
				now := time.Duration(i*4+g) * time.Microsecond
				var code int
				switch i % 4 {
				case 0:
					_, code = opNextFrame(id, now, buf)
				case 1:
					code = opOnTimer(id, now)
				case 2:
					_, code = opCounters(id)
				default:
					code = opHandleFrame(id, now, buf[:20])
				}
				results <- code
			}
		}()
	}
	close(start)
	for range 300 {
		switch c := <-results; c {
		case codeOK, codeMore, codeTime, codeFrame:
		default:
			t.Fatalf("before free: %s", codeName(c))
		}
	}
	if code := opFree(id); code != codeOK {
		t.Fatalf("free: %s", codeName(code))
	}
	for range 500 {
		switch c := <-results; c {
		case codeOK, codeMore, codeTime, codeFrame, codeHandle:
		default:
			t.Fatalf("around free: %s", codeName(c))
		}
	}
	if code := opOnTimer(id, time.Hour); code != codeHandle {
		t.Fatalf("after free: %s", codeName(code))
	}
}
