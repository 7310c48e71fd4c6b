package bridge

import (
	"testing"
	"time"
)

// sentQueue returns a queue of window 16 from isn with one TLP per sendAt
// time (first transmissions), each holding its own transmit-pool slot.
func sentQueue(t *testing.T, isn uint32, sendAt ...time.Duration) (*retransmitQueue, *pool) {
	t.Helper()
	q := newRetransmitQueue(16)
	q.limit = 16
	q.restart(isn)
	p := newPool(16, 8)
	for _, at := range sendAt {
		q.push(&meta{slot: p.get(), n: 8}, at)
	}
	return &q, &p
}

// TestRetransmitAcknowledge: a cumulative ack frees entries and their
// slots, the SACK bitmap marks the ones it names, and the RTT sample is
// from the last TLP acknowledged that was sent once.
func TestRetransmitAcknowledge(t *testing.T) {
	const isn = 0xfffffffe // the sequence numbers wrap
	us := time.Microsecond
	tests := []struct {
		name       string
		ack, sack  uint32 // ack relative to isn
		resent     []uint32
		wantUna    uint32 // relative
		wantSacked []uint32
		sample     time.Duration
		progress   bool
	}{
		{name: "nothing new", ack: 0, wantUna: 0, sample: -1},
		{name: "cumulative two", ack: 2, wantUna: 2, sample: 100*us - 1*us, progress: true},
		{name: "sack only", ack: 0, sack: 0b101, wantUna: 0, wantSacked: []uint32{1, 3}, sample: 100*us - 3*us},
		{name: "sack beyond sent ignored", ack: 3, sack: 1 << 5, wantUna: 3, sample: 100*us - 2*us, progress: true},
		{name: "retransmitted gives no sample", ack: 1, resent: []uint32{0}, wantUna: 1, sample: -1, progress: true},
		{name: "sample from the one sent once", ack: 2, resent: []uint32{1}, wantUna: 2, sample: 100*us - 0*us, progress: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, p := sentQueue(t, isn, 0, 1*us, 2*us, 3*us, 4*us)
			for _, r := range tc.resent {
				e := q.at(isn + r)
				q.mark(e)
				q.resend(e, 50*us)
			}
			free := len(p.free)
			r := q.acknowledge(100*us, isn+tc.ack, tc.sack, 0, p)
			if q.una != isn+tc.wantUna || r.progress != tc.progress || r.sample != tc.sample {
				t.Fatalf("una %#x progress %v sample %v; want %#x %v %v", q.una, r.progress, r.sample, uint32(isn+tc.wantUna), tc.progress, tc.sample)
			}
			if got := len(p.free) - free; got != int(tc.wantUna) {
				t.Errorf("%d slots freed, want %d", got, tc.wantUna)
			}
			for s := q.una; s != q.nxt; s++ {
				want := false
				for _, w := range tc.wantSacked {
					want = want || s == isn+w
				}
				if q.at(s).sacked != want {
					t.Errorf("seq %#x: sacked %v, want %v", s, q.at(s).sacked, want)
				}
			}
			if err := q.check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestRetransmitMarking: which TLPs a NAK, RACK-style overtaking and an
// answered RTO probe mark for retransmission.
func TestRetransmitMarking(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name string
		// sent at 0,0,0 (one frame), 10, 20, 30 us: txOrder 1..6.
		act  func(t *testing.T, q *retransmitQueue, p *pool)
		want []uint32 // marked, relative to isn 100
	}{
		{"NAK marks the frame of the hole", func(t *testing.T, q *retransmitQueue, p *pool) {
			q.acknowledge(40*us, 100, 1<<3, 0, p)
			q.markNakFrame(40*us, 100, 5*us)
		}, []uint32{0, 1, 2}},
		{"NAK for a frame resent too recently", func(t *testing.T, q *retransmitQueue, p *pool) {
			q.markNakFrame(3*us, 100, 5*us)
		}, nil},
		{"NAK after the hole moved on", func(t *testing.T, q *retransmitQueue, p *pool) {
			q.acknowledge(40*us, 101, 0, 0, p)
			q.markNakFrame(40*us, 100, 0)
		}, nil},
		{"three later transmissions overtook", func(t *testing.T, q *retransmitQueue, p *pool) {
			// 3..5 (txOrder 4..6) arrived: 0..2 (txOrder 1..3) are lost.
			r := q.acknowledge(40*us, 100, 0b11100, 0, p)
			if !r.newMax {
				t.Fatal("later transmissions arrived, maxAcked did not move")
			}
			q.markOvertaken(100)
		}, []uint32{0, 1, 2}},
		{"two later transmissions are reordering", func(t *testing.T, q *retransmitQueue, p *pool) {
			// 4, 5 arrived: 3 (txOrder 4) was overtaken by two only.
			q.acknowledge(40*us, 103, 0b11, 0, p)
			q.markOvertaken(103)
		}, nil},
		{"early ack of a retransmission does not count", func(t *testing.T, q *retransmitQueue, p *pool) {
			e := q.at(105)
			q.mark(e)
			q.resend(e, 35*us) // txOrder 7
			// Acked 1 us after the resend, minimum RTT 10 us: the
			// original arrived, with txOrder 6. SACK bit 1 is 105
			// (Ack+1+1); bit 2 would name 106, never sent, and the
			// case would test nothing.
			q.acknowledge(36*us, 103, 0b10, 10*us, p)
			if !q.at(105).sacked {
				t.Fatal("SACK bit 1 of Ack 103 did not reach 105")
			}
			q.markOvertaken(103)
		}, nil},
		{"probe answer marks what was sent before it", func(t *testing.T, q *retransmitQueue, p *pool) {
			q.markSentBefore(100, 4) // probe after txOrder 4
		}, []uint32{0, 1, 2, 3}},
		{"probe answer spares sacked", func(t *testing.T, q *retransmitQueue, p *pool) {
			q.acknowledge(40*us, 100, 0b10, 0, p)
			q.markSentBefore(100, 6)
		}, []uint32{0, 1, 3, 4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, p := sentQueue(t, 100, 0, 0, 0, 10*us, 20*us, 30*us)
			tc.act(t, q, p)
			var got []uint32
			for s := q.una; s != q.nxt; s++ {
				if q.at(s).needRetx {
					got = append(got, s-100)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("marked %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("marked %v, want %v", got, tc.want)
				}
			}
			if err := q.check(); err != nil {
				t.Fatal(err)
			}
			if len(got) > 0 && q.firstMarked() != 100+got[0] {
				t.Errorf("firstMarked %d, want %d", q.firstMarked()-100, got[0])
			}
		})
	}
}

// TestRetransmitResendAndClear: a resend unmarks and renumbers the entry;
// clear hands every TLP in flight over in sequence order.
func TestRetransmitResendAndClear(t *testing.T) {
	q, _ := sentQueue(t, 7, 0, 0, 0)
	if !q.canSend() || q.inFlight() != 3 {
		t.Fatalf("in flight %d, can send %v", q.inFlight(), q.canSend())
	}
	e := q.at(8)
	q.mark(e)
	q.mark(e) // twice: counted once
	if q.marked != 1 {
		t.Fatalf("marked count %d after marking one entry twice", q.marked)
	}
	q.resend(e, time.Second)
	if e.needRetx || q.marked != 0 || e.txCount != 2 || e.txOrder != 4 || e.sentAt != time.Second {
		t.Fatalf("after resend: %+v, marked %d", *e, q.marked)
	}
	var order []int32
	q.clear(func(m *meta) { order = append(order, m.slot) })
	if len(order) != 3 || !q.empty() || q.at(7).slot != 0 || q.at(8).txCount != 0 {
		t.Fatalf("clear handed over %v; empty %v", order, q.empty())
	}
	q.limit = 2
	q.push(&meta{}, 0)
	q.push(&meta{}, 0)
	if q.canSend() {
		t.Fatal("window of 2 full, canSend still true")
	}
}

// TestRetransmitKarnSamples: no RTT sample comes from a TLP sent more than
// once, whether a SACK or the cumulative ack reports it, and none comes
// twice from one TLP: a SACKed TLP gave its sample when it was SACKed, and
// the cumulative ack that covers it later measures the hole, not the path
// (RTX-2).
func TestRetransmitKarnSamples(t *testing.T) {
	us := time.Microsecond
	t.Run("SACK of a retransmitted TLP", func(t *testing.T) {
		q, p := sentQueue(t, 100, 0, 1*us, 2*us)
		e := q.at(102)
		q.mark(e)
		q.resend(e, 50*us)
		r := q.acknowledge(60*us, 100, 0b10, 0, p) // 102 arrived
		if !e.sacked || r.sample != -1 {
			t.Fatalf("sacked %v, sample %v; want a SACK and no sample from a retransmitted TLP", e.sacked, r.sample)
		}
	})
	t.Run("cumulative ack of a SACKed TLP", func(t *testing.T) {
		q, p := sentQueue(t, 100, 0, 1*us, 2*us)
		if r := q.acknowledge(40*us, 100, 0b1, 0, p); r.sample != 39*us {
			t.Fatalf("SACK of 101: sample %v, want %v", r.sample, 39*us)
		}
		e := q.at(100)
		q.mark(e)
		q.resend(e, 50*us)
		// 100 (sent twice) and 101 (SACKed already) are acknowledged.
		if r := q.acknowledge(500*us, 102, 0, 0, p); !r.progress || r.sample != -1 {
			t.Fatalf("progress %v, sample %v; want progress and no sample", r.progress, r.sample)
		}
	})
}

// TestRetransmitAckClearsMark: a TLP marked for retransmission that the
// cumulative ack covers before it went out again is no longer counted as
// marked.
func TestRetransmitAckClearsMark(t *testing.T) {
	q, p := sentQueue(t, 100, 0, 0, 0)
	q.mark(q.at(100))
	q.mark(q.at(101))
	q.acknowledge(10*time.Microsecond, 101, 0, 0, p)
	if q.marked != 1 || q.firstMarked() != 101 {
		t.Fatalf("marked count %d, first marked %d; want 1, 101", q.marked, q.firstMarked())
	}
	if err := q.check(); err != nil {
		t.Fatal(err)
	}
}

// TestRetransmitOvertakenHorizon: RACK marks as far as the SACK bitmap
// reaches, up to Ack+32 (bit 31) included, and not beyond: the receiver
// may hold Ack+33 without saying so.
func TestRetransmitOvertakenHorizon(t *testing.T) {
	us := time.Microsecond
	q := newRetransmitQueue(64)
	q.limit = 64
	q.restart(0)
	p := newPool(64, 8)
	for range 34 {
		q.push(&meta{slot: p.get(), n: 8}, 0) // 0..33, txOrder 1..34
	}
	for s := uint32(1); s <= 3; s++ { // resent: txOrder 35..37
		e := q.at(s)
		q.mark(e)
		q.resend(e, 10*us)
	}
	if r := q.acknowledge(100*us, 0, 0b111, 0, &p); !r.newMax {
		t.Fatal("the resent copies arrived, maxAcked did not move")
	}
	q.markOvertaken(0)
	for s := uint32(0); s < 34; s++ {
		want := s == 0 || (s >= 4 && s <= 32)
		if got := q.at(s).needRetx; got != want {
			t.Errorf("seq %d: marked %v, want %v", s, got, want)
		}
	}
	if err := q.check(); err != nil {
		t.Fatal(err)
	}
}
