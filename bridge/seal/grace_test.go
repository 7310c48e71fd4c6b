package seal_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestPreviousKeyGrace: the host side moves to epoch 1 while a frame of
// epoch 0 is still on its way; the GPU side opens that straggler until
// PreviousGrace frames of epoch 1 or PreviousGraceTime after the first,
// whichever comes first, and refuses it after. Its echo then lets the host
// side move on.
func TestPreviousKeyGrace(t *testing.T) {
	t.Parallel()
	const switchAt = 100 * time.Millisecond // when the first frame of epoch 1 arrives
	tests := []struct {
		name      string
		frames    uint64        // PreviousGrace
		after     time.Duration // PreviousGraceTime
		newFrames int           // frames of epoch 1 opened at switchAt
		at        time.Duration // the straggler arrives at switchAt + at
		noTick    bool          // the owner never calls Tick
		wantOpen  bool
	}{
		{"before the frame count", 4, time.Hour, 3, 0, false, true},
		{"at the frame count", 4, time.Hour, 4, 0, false, false},
		{"just before the time", 4096, 10 * time.Millisecond, 1, 10*time.Millisecond - 1, false, true},
		{"at the time", 4096, 10 * time.Millisecond, 1, 10 * time.Millisecond, false, false},
		{"count first", 4, 10 * time.Millisecond, 4, time.Millisecond, false, false},
		{"time first", 4096, 10 * time.Millisecond, 2, 10 * time.Millisecond, false, false},
		{"default time, just before", 4096, 0, 1, seal.DefaultPreviousGraceTime - 1, false, true},
		{"default time", 4096, 0, 1, seal.DefaultPreviousGraceTime, false, false},
		{"never ticked: frame count only", 4096, 10 * time.Millisecond, 1, time.Hour, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host, gpu := pair(t, seal.ModeGCM, func(c *seal.Config) { c.PreviousGrace, c.PreviousGraceTime = tc.frames, tc.after })
			tick := func(now time.Duration) {
				if !tc.noTick {
					gpu.Tick(now)
				}
			}
			tick(0)
			seq := uint32(0)
			sealFrom := func(ch *seal.Channel) []byte {
				t.Helper()
				seq++
				f, err := ch.Seal(nil, plainFrame(encap.MsgTLP, seq, []byte{byte(seq)}))
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
			straggler := sealFrom(host) // epoch 0
			host.Rekey()
			for i := 0; i < tc.newFrames; i++ {
				f := sealFrom(host)
				tick(switchAt)
				if _, err := gpu.Open(f); err != nil {
					t.Fatalf("epoch-1 frame %d: %v", i, err)
				}
			}
			if st := gpu.State(); st.RxEpoch != 1 {
				t.Fatalf("GPU side receives epoch %d, want 1", st.RxEpoch)
			}
			tick(switchAt + tc.at)
			_, err := gpu.Open(straggler)
			if tc.wantOpen && err != nil {
				t.Fatalf("epoch-0 straggler refused within the grace: %v", err)
			}
			if !tc.wantOpen && !errors.Is(err, seal.ErrUnknownEpoch) {
				t.Fatalf("epoch-0 straggler after the grace: %v, want ErrUnknownEpoch", err)
			}
			if st, c := gpu.State(), gpu.Counters(); st.RxPrevious != tc.wantOpen || c.PreviousRetired != uint64(b2i(!tc.wantOpen)) {
				t.Fatalf("previous key open %v, %d retired; want open %v", st.RxPrevious, c.PreviousRetired, tc.wantOpen)
			}
			// The GPU side's next frame echoes the oldest epoch it opens:
			// only once epoch 0 retired may the host side move again.
			if _, err := host.Open(sealFrom(gpu)); err != nil {
				t.Fatal(err)
			}
			if got := host.State().PeerHolds; got == tc.wantOpen {
				t.Fatalf("host side may move on: %v, want %v", got, !tc.wantOpen)
			}
		})
	}
}

// TestPreviousKeyDeadline: Deadline names the time Tick retires the
// previous key at, and a Tick with an earlier time changes nothing.
func TestPreviousKeyDeadline(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGMAC, func(c *seal.Config) { c.PreviousGraceTime = 5 * time.Millisecond })
	if _, ok := gpu.Deadline(); ok {
		t.Fatal("deadline with no previous key")
	}
	host.Rekey()
	f, err := host.Seal(nil, plainFrame(encap.MsgAck, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	gpu.Tick(2 * time.Millisecond)
	if _, err := gpu.Open(f); err != nil {
		t.Fatal(err)
	}
	if d, ok := gpu.Deadline(); !ok || d != 7*time.Millisecond {
		t.Fatalf("deadline %v %v, want 7ms", d, ok)
	}
	gpu.Tick(7*time.Millisecond - 1)
	gpu.Tick(0) // earlier: ignored
	if !gpu.State().RxPrevious {
		t.Fatal("previous key retired before its deadline")
	}
	gpu.Tick(7 * time.Millisecond)
	if _, ok := gpu.Deadline(); ok || gpu.State().RxPrevious {
		t.Fatal("previous key still open at its deadline")
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
