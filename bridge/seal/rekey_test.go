package seal_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// lossyNet is one direction of a network that delays each frame by 0 to
// maxDelay-1 ticks (so frames overtake each other) and duplicates some
// (the copy comes later still): every frame arrives at least once.
type lossyNet struct {
	rng      *rand.Rand
	maxDelay int
	dupPct   int
	inFlight []flight
}

type flight struct {
	due   int
	frame []byte
}

func (n *lossyNet) send(now int, f []byte) {
	n.inFlight = append(n.inFlight, flight{now + n.rng.IntN(n.maxDelay), f})
	if n.rng.IntN(100) < n.dupPct {
		n.inFlight = append(n.inFlight, flight{now + n.rng.IntN(3*n.maxDelay), append([]byte(nil), f...)})
	}
}

// due returns a random frame due by now (everything, when flush), or nil.
func (n *lossyNet) due(now int, flush bool) []byte {
	var idx []int
	for i, f := range n.inFlight {
		if flush || f.due <= now {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	i := idx[n.rng.IntN(len(idx))]
	f := n.inFlight[i].frame
	n.inFlight = append(n.inFlight[:i], n.inFlight[i+1:]...)
	return f
}

// end is one side of the traffic test: its channel, what it sent and what
// it opened.
type end struct {
	ch     *seal.Channel
	sent   int
	opened map[uint32]int
}

// TestRekeyUnderReorderingLosesNothing runs traffic both ways across many
// epochs (RekeyAfter 50, Rekey on demand every few frames, a manager key
// change) through a
// network that delays frames by up to 6 ticks (1 to 3 frames are sent per
// tick) and duplicates 5%: every frame opens exactly once, a duplicate is refused as replayed (or, once its key
// retired, as of an unknown epoch), nothing fails authentication.
func TestRekeyUnderReorderingLosesNothing(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(m)))
			h, g := pair(t, m, func(c *seal.Config) { c.RekeyAfter, c.PreviousGrace = 50, 20 })
			ends := [2]*end{{ch: h, opened: map[uint32]int{}}, {ch: g, opened: map[uint32]int{}}}
			nets := [2]*lossyNet{
				{rng: rng, maxDelay: 6, dupPct: 5},
				{rng: rng, maxDelay: 6, dupPct: 5},
			}
			const frames = 20000
			installed := false
			tick := 0
			deliver := func(to int, flush bool) {
				for f := nets[1-to].due(tick, flush); f != nil; f = nets[1-to].due(tick, flush) {
					body, err := ends[to].ch.Open(f)
					if err != nil {
						id := binary.BigEndian.Uint32(f[8:]) // Seq in clear: the frame's id
						if ends[to].opened[id] == 0 || !(errors.Is(err, seal.ErrReplayed) || errors.Is(err, seal.ErrUnknownEpoch)) {
							t.Fatalf("side %d: frame %d refused (%v) before it ever opened", to, id, err)
						}
						continue
					}
					id := binary.BigEndian.Uint32(body)
					ends[to].opened[id]++
					if ends[to].opened[id] > 1 {
						t.Fatalf("side %d: frame %d opened twice", to, id)
					}
				}
			}
			var buf []byte
			for ; ends[0].sent < frames || ends[1].sent < frames; tick++ {
				from := rng.IntN(2)
				for range 1 + rng.IntN(3) {
					e := ends[from]
					body := make([]byte, 4+rng.IntN(64))
					binary.BigEndian.PutUint32(body, uint32(e.sent))
					f, err := e.ch.Seal(buf[:0], plainFrame(encap.MsgTLP, uint32(e.sent), body))
					if err != nil {
						t.Fatalf("side %d frame %d: seal: %v", from, e.sent, err)
					}
					nets[from].send(tick, append([]byte(nil), f...))
					e.sent++
					buf = f
				}
				deliver(0, false)
				deliver(1, false)
				if rng.IntN(4) == 0 {
					// Rekeys on demand, often: each waits for the peer's echo.
					ends[rng.IntN(2)].ch.Rekey()
				}
				if !installed && ends[0].sent > frames/2 {
					// The manager's key change: install on both, activate on one;
					// the other follows when it sees the new generation.
					for _, e := range ends {
						if err := e.ch.InstallKey(2, testKey(0x40)); err != nil {
							t.Fatal(err)
						}
					}
					h.ActivateKey()
					installed = true
				}
			}
			deliver(0, true)
			deliver(1, true)
			for side, e := range ends {
				peer := ends[1-side]
				if len(peer.opened) != e.sent {
					t.Errorf("side %d sent %d frames, the peer opened %d distinct", side, e.sent, len(peer.opened))
				}
				c, st := e.ch.Counters(), e.ch.State()
				t.Logf("side %d: %+v\n  %+v", side, c, st)
				if c.AuthFailed != 0 {
					t.Errorf("side %d: %d frames failed authentication", side, c.AuthFailed)
				}
				if c.TxRekeys < frames/100 {
					t.Errorf("side %d: only %d rekeys in %d frames (RekeyAfter 50)", side, c.TxRekeys, e.sent)
				}
				if c.Replayed == 0 {
					t.Errorf("side %d: no duplicate was refused as replayed", side)
				}
				if st.TxGeneration != 2 || st.RxGeneration != 2 {
					t.Errorf("side %d: generations tx %d rx %d after the change, want 2", side, st.TxGeneration, st.RxGeneration)
				}
			}
		})
	}
}

// TestSenderWaitsForThePeersEcho: with no frames coming back, the sender
// cannot learn that the peer holds its epoch; it moves once (the peer
// starts a session holding epoch 1), then refuses past 2 * RekeyAfter
// rather than reuse a key further or outrun the peer. One frame back
// unblocks it.
func TestSenderWaitsForThePeersEcho(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, func(c *seal.Config) { c.RekeyAfter, c.PreviousGrace = 4, 2 })
	send := func() error {
		f, err := host.Seal(nil, plainFrame(encap.MsgTLP, 0, []byte("x")))
		if err != nil {
			return err
		}
		_, err = gpu.Open(f)
		return err
	}
	for i := range 4 + 8 {
		if err := send(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if st := host.State(); st.TxEpoch != 1 || st.TxFrames != 8 {
		t.Fatalf("after 12 frames: %+v, want epoch 1 with 8 frames", st)
	}
	if err := send(); !errors.Is(err, seal.ErrKeyExhausted) {
		t.Fatalf("frame 13 with no echo: %v, want ErrKeyExhausted", err)
	}
	back, err := gpu.Seal(nil, plainFrame(encap.MsgAck, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.Open(back); err != nil {
		t.Fatal(err)
	}
	if err := send(); err != nil {
		t.Fatalf("after the echo: %v", err)
	}
	if st := host.State(); st.TxEpoch != 2 {
		t.Fatalf("after the echo: %+v, want epoch 2", st)
	}
}

// TestKeyChangeAcrossSessionStart: the host side activated generation 2
// before the session started, the GPU side only installed it: the GPU side
// opens the host's epoch-0 frames under generation 2 and follows.
func TestKeyChangeAcrossSessionStart(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGMAC, nil)
	for _, c := range []*seal.Channel{host, gpu} {
		c.EndSession()
		if err := c.InstallKey(2, testKey(0x80)); err != nil {
			t.Fatal(err)
		}
	}
	host.ActivateKey()
	if err := host.StartSession(hostNonce, gpuNonce); err != nil {
		t.Fatal(err)
	}
	if err := gpu.StartSession(gpuNonce, hostNonce); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f, err := host.Seal(nil, plainFrame(encap.MsgTLP, uint32(i), []byte("y")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gpu.Open(f); err != nil {
			t.Fatalf("host frame %d under generation 2: %v", i, err)
		}
		r, err := gpu.Seal(nil, plainFrame(encap.MsgAck, 0, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := host.Open(r); err != nil {
			t.Fatalf("GPU frame %d: %v", i, err)
		}
	}
	if st := gpu.State(); st.ActiveGeneration != 2 || st.TxGeneration != 2 || st.RxGeneration != 2 {
		t.Fatalf("GPU side did not follow to generation 2: %+v", st)
	}
}

// TestKeyChangeInFirstEpoch: the manager's key change in a session that
// has not moved epoch yet (the usual case: RekeyAfter is large). The host
// side activates generation 2 and moves to epoch 1 under it; the GPU side
// opens that at once and follows; nothing is refused.
func TestKeyChangeInFirstEpoch(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		host, gpu := pair(t, m, nil)
		exchange := func(i int) {
			t.Helper()
			f, err := host.Seal(nil, plainFrame(encap.MsgTLP, uint32(i), []byte("z")))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gpu.Open(f); err != nil {
				t.Fatalf("%v: host frame %d (%+v): %v", m, i, host.State(), err)
			}
			r, err := gpu.Seal(nil, plainFrame(encap.MsgAck, 0, nil))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := host.Open(r); err != nil {
				t.Fatalf("%v: GPU frame %d (%+v): %v", m, i, gpu.State(), err)
			}
		}
		exchange(0)
		for _, c := range []*seal.Channel{host, gpu} {
			if err := c.InstallKey(2, testKey(0x80)); err != nil {
				t.Fatal(err)
			}
		}
		host.ActivateKey()
		for i := 1; i < 4; i++ {
			exchange(i)
		}
		for side, c := range []*seal.Channel{host, gpu} {
			if st := c.State(); st.TxGeneration != 2 || st.RxGeneration != 2 || st.TxEpoch != 1 {
				t.Fatalf("%v: side %d after the change: %+v, want generation 2 both ways at epoch 1", m, side, st)
			}
		}
	}
}

// TestKeyChangeWhileSessionDown: the host side activated generation 2 and
// its session ended before the GPU side saw any frame under it (the link
// went down). The GPU side still seals its HELLO under generation 1: the
// host side must still open it, and the next session must carry traffic
// both ways and bring the GPU side to generation 2.
func TestKeyChangeWhileSessionDown(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	for _, c := range []*seal.Channel{host, gpu} {
		if err := c.InstallKey(2, testKey(0x80)); err != nil {
			t.Fatal(err)
		}
	}
	host.ActivateKey()
	host.EndSession()
	gpu.EndSession()
	hello, err := gpu.SealHandshake(nil, helloFrame(encap.CtlHello), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.Open(hello); err != nil {
		t.Fatalf("GPU HELLO under generation 1 after the host activated 2: %v", err)
	}
	hostHello, err := host.SealHandshake(nil, helloFrame(encap.CtlHelloAck), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(hostHello); err != nil {
		t.Fatalf("host HELLO-ACK under generation 2: %v", err)
	}
	if err := host.StartSession(hostNonce, gpuNonce); err != nil {
		t.Fatal(err)
	}
	if err := gpu.StartSession(gpuNonce, hostNonce); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r, err := gpu.Seal(nil, plainFrame(encap.MsgAck, 0, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := host.Open(r); err != nil {
			t.Fatalf("GPU frame %d: %v (host %+v)", i, err, host.State())
		}
		f, err := host.Seal(nil, plainFrame(encap.MsgTLP, uint32(i), []byte("w")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gpu.Open(f); err != nil {
			t.Fatalf("host frame %d: %v (GPU %+v)", i, err, gpu.State())
		}
	}
	if st := gpu.State(); st.ActiveGeneration != 2 || st.TxGeneration != 2 {
		t.Fatalf("GPU side did not follow to generation 2: %+v", st)
	}
}
