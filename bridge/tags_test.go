package bridge

import (
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestTagTableAlloc: tags come from the peer's tag space, least recently
// used first, up to the limit; stale tags count against it.
func TestTagTableAlloc(t *testing.T) {
	tests := []struct {
		name      string
		bits      int
		limit     int
		wantFirst uint16
		wantN     int
	}{
		{"8-bit space", 8, 0, 0, 256},
		{"10-bit space", 10, 0, 256, 768},
		{"limited", 10, 5, 256, 5},
		{"limit above the space", 8, 1000, 0, 256},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTagTable(tc.bits, tc.limit)
			var got []uint16
			for {
				w, ok := tt.alloc()
				if !ok {
					break
				}
				got = append(got, w)
			}
			if len(got) != tc.wantN || got[0] != tc.wantFirst || got[len(got)-1] != tc.wantFirst+uint16(tc.wantN-1) {
				t.Fatalf("allocated %d tags %d..%d, want %d from %d", len(got), got[0], got[len(got)-1], tc.wantN, tc.wantFirst)
			}
			if tt.active != tc.wantN || tt.inUse() != tc.wantN {
				t.Fatalf("active %d in use %d, want %d", tt.active, tt.inUse(), tc.wantN)
			}
			// A released tag goes to the back of the free list (least
			// recently used first): the next alloc takes a tag never used
			// if the limit left any, else the released one, with a new
			// generation either way.
			want, wantGen := got[0], tt.entries[got[0]].gen+1
			if tc.wantN < len(tt.free.buf) {
				want, wantGen = tc.wantFirst+uint16(tc.wantN), 1
			}
			tt.release(got[0])
			w, ok := tt.alloc()
			if !ok || w != want || tt.entries[w].gen != wantGen {
				t.Fatalf("after releasing %d: alloc %d %v gen %d, want %d gen %d", got[0], w, ok, tt.entries[w].gen, want, wantGen)
			}
			if !tt.owns(got[0]) || tt.owns(tc.wantFirst+uint16(len(tt.free.buf))) || (tc.wantFirst > 0 && tt.owns(tc.wantFirst-1)) {
				t.Fatalf("owns disagrees with the space starting at %d", tc.wantFirst)
			}
			if err := tt.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTagTableExpire: a request open for the timeout is handed over and
// goes stale; a stale tag is free again one more timeout later.
func TestTagTableExpire(t *testing.T) {
	const to = 10 * time.Millisecond
	tests := []struct {
		name        string
		now         time.Duration
		wantTimeout int
		wantFree    int // of 256
		wantNext    time.Duration
	}{
		{"before the timeout", 9 * time.Millisecond, 0, 253, 10 * time.Millisecond},
		{"first times out", 10 * time.Millisecond, 1, 253, 12 * time.Millisecond},
		{"all time out", 30 * time.Millisecond, 3, 253, 40 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTagTable(8, 0)
			for _, start := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond} {
				w, _ := tt.alloc()
				tt.entries[w].start = start
			}
			n := 0
			tt.expire(tc.now, to, func(e *tagEntry) {
				if e.state != tagActive {
					t.Errorf("handed over an entry in state %d", e.state)
				}
				n++
			})
			if n != tc.wantTimeout || tt.free.len() != tc.wantFree || tt.active != 3-n || tt.nextCheck != tc.wantNext {
				t.Fatalf("timed out %d, %d free, %d active, next %v; want %d, %d, %d, %v", n, tt.free.len(), tt.active, tt.nextCheck, tc.wantTimeout, tc.wantFree, 3-tc.wantTimeout, tc.wantNext)
			}
			// One more timeout: the quarantine ends.
			tt.expire(tc.now+to, to, func(*tagEntry) {})
			if n == 3 && (tt.free.len() != 256 || tt.nextCheck != noDeadline) {
				t.Fatalf("after the quarantine: %d free, next %v", tt.free.len(), tt.nextCheck)
			}
			if err := tt.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTagLimitCountsQuarantined: a tag in quarantine (its request timed
// out, its late completion may still come) counts against the limit like
// an open one, so a requester whose reads time out cannot push more than
// the limit onto the wire; the limit frees up only as the quarantine ends.
func TestTagLimitCountsQuarantined(t *testing.T) {
	const to = 10 * time.Millisecond
	tt := newTagTable(8, 4)
	for i := range 4 {
		w, ok := tt.alloc()
		if !ok {
			t.Fatalf("alloc %d of 4 refused", i)
		}
		tt.entries[w].start = 0
	}
	tt.expire(to, to, func(*tagEntry) {}) // all four stale, none open
	if tt.active != 0 || tt.inUse() != 4 {
		t.Fatalf("after the timeout: %d active, %d in use; want 0 and 4", tt.active, tt.inUse())
	}
	if w, ok := tt.alloc(); ok {
		t.Fatalf("alloc gave tag %d with 4 tags quarantined under a limit of 4", w)
	}
	tt.expire(2*to, to, func(*tagEntry) {}) // the quarantine ends
	for i := range 4 {
		if _, ok := tt.alloc(); !ok {
			t.Fatalf("alloc %d of 4 refused after the quarantine", i)
		}
	}
	if err := tt.check(); err != nil {
		t.Fatal(err)
	}
}

// TestTagTableAbort frees everything, handing over only open requests.
func TestTagTableAbort(t *testing.T) {
	tt := newTagTable(8, 0)
	for i := 0; i < 3; i++ {
		tt.alloc()
	}
	tt.expire(time.Hour, time.Hour, func(*tagEntry) {}) // all three stale
	tt.alloc()
	tt.alloc()
	n := 0
	tt.abort(func(*tagEntry) { n++ })
	if n != 2 || tt.free.len() != 256 || tt.active != 0 || tt.nextCheck != noDeadline {
		t.Fatalf("abort handed over %d (want 2 open), %d free, %d active", n, tt.free.len(), tt.active)
	}
}

// TestAccount: completions are matched by requester and state, and the
// bytes still owed follow split completions to the last.
func TestAccount(t *testing.T) {
	read := func(n int) tlp.View {
		raw := enc(mrd(hostRC, 1, 0x1000, n))
		return tlp.View(raw)
	}
	cplFor := func(req tlp.ID, bc int, la uint8, n int) tlp.View {
		return tlp.View(enc(cpld(gpuFn, req, 1, bc, la, make([]byte, n))))
	}
	tests := []struct {
		name      string
		state     uint8
		cpls      []tlp.View
		want      []int
		remaining int
		mism      uint64
	}{
		{"one completion", tagActive, []tlp.View{cplFor(hostRC, 64, 0, 64)}, []int{cplLast}, 64, 0},
		{"split in two", tagActive, []tlp.View{cplFor(hostRC, 64, 0, 32), cplFor(hostRC, 32, 32, 32)}, []int{cplMore, cplLast}, 32, 0},
		{"wrong byte count counted", tagActive, []tlp.View{cplFor(hostRC, 60, 0, 32)}, []int{cplMore}, 28, 1},
		{"other requester", tagActive, []tlp.View{cplFor(reqB, 64, 0, 64)}, []int{cplNoMatch}, 64, 0},
		{"free tag", tagFree, []tlp.View{cplFor(hostRC, 64, 0, 64)}, []int{cplNoMatch}, 64, 0},
		{"stale tag", tagStale, []tlp.View{cplFor(hostRC, 64, 0, 64)}, []int{cplLate}, 64, 0},
		{"no data ends it", tagActive, []tlp.View{tlp.View(enc(tlp.Packet{Kind: tlp.Cpl, CompleterID: gpuFn, RequesterID: hostRC, Tag: 1, Status: tlp.StatusUR, ByteCount: 64}))}, []int{cplLast}, 64, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e tagEntry
			setRequest(&e, read(64))
			e.state = tc.state
			var mism uint64
			for i, c := range tc.cpls {
				if got := account(&e, c, hostRC, &mism); got != tc.want[i] {
					t.Fatalf("completion %d: %d, want %d", i, got, tc.want[i])
				}
			}
			if e.remaining != tc.remaining || mism != tc.mism {
				t.Fatalf("remaining %d, mismatches %d; want %d, %d", e.remaining, mism, tc.remaining, tc.mism)
			}
		})
	}
}

// TestAccountUnalignedRead: a read that starts inside a DW is completed
// with payloads that begin at the DW holding Lower Address; the bytes
// before it were not asked for, so they neither count against the Byte
// Count nor move the next Lower Address past the bytes returned.
func TestAccountUnalignedRead(t *testing.T) {
	// 8 bytes from 0x103e: DWs 0x103c..0x1044, First BE 1100, Last BE 0011.
	req := tlp.View(enc(tlp.Packet{Kind: tlp.MRd, RequesterID: hostRC, Tag: 1, FirstBE: 0xc, LastBE: 0x3, Address: 0x103c, Length: 3}))
	var e tagEntry
	setRequest(&e, req)
	e.state = tagActive
	if e.remaining != 8 || e.nextLA != 0x3e {
		t.Fatalf("request: %d bytes from Lower Address %#x, want 8 from 0x3e", e.remaining, e.nextLA)
	}
	var mism uint64
	// Split at the 64-byte boundary: DW 0x103c (2 bytes asked for) first.
	first := tlp.View(enc(cpld(gpuFn, hostRC, 1, 8, 0x3e, make([]byte, 4))))
	if got := account(&e, first, hostRC, &mism); got != cplMore || e.remaining != 6 || e.nextLA != 0x40 {
		t.Fatalf("first completion: %d, %d bytes left from %#x; want %d, 6 from 0x40", got, e.remaining, e.nextLA, cplMore)
	}
	second := tlp.View(enc(cpld(gpuFn, hostRC, 1, 6, 0x40, make([]byte, 8))))
	if got := account(&e, second, hostRC, &mism); got != cplLast || mism != 0 {
		t.Fatalf("second completion: %d, %d byte count mismatches; want %d, 0", got, mism, cplLast)
	}
}

// TestLateSplitCompletionKeepsQuarantine: a request that timed out keeps
// its tag quarantined (counted against MaxOutstanding) until the last of
// its late completions arrives: a partial one must not free it, or the
// rest of the late completions could match a new request on that tag.
func TestLateSplitCompletionKeepsQuarantine(t *testing.T) {
	p := newTestPair(t, Config{CompletionTimeout: 5 * time.Millisecond, PeerID: gpuFn, MaxOutstanding: 1}, Config{})
	p.up()
	p.send(p.h, mrd(hostRC, 33, 0x1000, 128))
	p.run()
	if len(p.gq) != 1 {
		t.Fatalf("GPU side got %d TLPs", len(p.gq))
	}
	req := p.gq[0].v()
	p.advance(6*time.Millisecond, 500*time.Microsecond) // CA, tag quarantined
	busy := func(when string) {
		t.Helper()
		if err := p.h.HandleTLP(p.now, enc(mrd(hostRC, 34, 0x2000, 4))); !errors.Is(err, ErrBusy) {
			t.Fatalf("%s: a new request got %v, want ErrBusy: the quarantined tag was freed", when, err)
		}
	}
	busy("after the timeout")
	p.send(p.g, cpld(gpuFn, req.RequesterID(), req.Tag(), 128, 0, make([]byte, 64)))
	p.run()
	busy("after the first of two late completions")
	p.send(p.g, cpld(gpuFn, req.RequesterID(), req.Tag(), 64, 64, make([]byte, 64)))
	p.run()
	if c := p.h.Counters(); c.LateCompletions != 2 || c.UnmatchedCompletions != 0 || len(p.hq) != 1 {
		t.Fatalf("%d late, %d unmatched completions, %d TLPs delivered; want 2, 0 and the CA", c.LateCompletions, c.UnmatchedCompletions, len(p.hq))
	}
	p.send(p.h, mrd(hostRC, 34, 0x2000, 4)) // the last one freed the tag
}

// TestTagTableQuarantineEndScheduled: every stale tag's quarantine end
// stays among the deadlines, also after a later scan that finds nothing of
// its own to schedule it: the tag is free again one timeout after its
// request timed out, not one timeout after the next request did.
func TestTagTableQuarantineEndScheduled(t *testing.T) {
	const ms = time.Millisecond
	tt := newTagTable(8, 2)
	for _, start := range []time.Duration{0, 4 * ms} {
		w, _ := tt.alloc()
		tt.entries[w].start = start
	}
	tt.expire(5*ms, 5*ms, func(*tagEntry) {}) // the first times out
	tt.expire(9*ms, 5*ms, func(*tagEntry) {}) // the second
	if tt.nextCheck != 10*ms {
		t.Fatalf("next check %v, want 10ms: the first tag's quarantine ends then", tt.nextCheck)
	}
	tt.expire(10*ms, 5*ms, func(*tagEntry) {})
	if _, ok := tt.alloc(); !ok {
		t.Fatal("no tag at 10ms under a limit of 2: the first quarantine did not end")
	}
	if tt.nextCheck != 14*ms {
		t.Fatalf("next check %v, want 14ms: the second tag's quarantine ends then", tt.nextCheck)
	}
}

// TestQueuedRequestWithReusedTagDropped: a request that timed out while
// queued (the window full) is never sent, even once its tag was freed and
// given to a newer request: it would carry that request's tag.
func TestQueuedRequestWithReusedTagDropped(t *testing.T) {
	const cto = 20 * time.Millisecond
	hc := Config{Window: 1, TxQueue: 512, CompletionTimeout: cto, MaxRTO: time.Millisecond, DeadAfter: 100 * time.Millisecond, PeerID: gpuFn}
	p := newTestPair(t, hc, Config{AckDelay: time.Microsecond, DeadAfter: 100 * time.Millisecond})
	p.up()
	cut := true
	p.drop = func(from *Bridge, f []byte) bool {
		return cut && from == p.h && encap.Header(f).Type() == encap.MsgTLP
	}
	p.send(p.h, mwr(0x1000, 64)) // in flight, lost: the window of 1 is full
	p.send(p.h, mrd(hostRC, 1, 0x2000, 4))
	p.run()
	p.advance(2*cto+cto/2, 100*time.Microsecond) // timed out, quarantine over
	if c := p.h.Counters(); c.CompletionTimeouts != 1 || p.h.txTags.inUse() != 0 {
		t.Fatalf("%d timeouts, %d tags in use; want 1 and 0", c.CompletionTimeouts, p.h.txTags.inUse())
	}
	// 256 new requests: the last one gets the first request's tag again.
	for i := range 256 {
		p.send(p.h, mrd(hostRC, uint16(i), 0x3000, 4))
	}
	cut = false
	p.advance(cto/2, 10*time.Microsecond) // one at a time, well within the timeout
	reads := 0
	for _, d := range p.gq {
		if d.v().Kind() == tlp.MRd {
			reads++
		}
	}
	if c := p.h.Counters(); reads != 256 || c.StaleRequestsDropped != 1 {
		t.Fatalf("GPU side got %d reads, %d stale requests dropped; want 256 and 1", reads, c.StaleRequestsDropped)
	}
}
