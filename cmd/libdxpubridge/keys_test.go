package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp"
)

func abiKey(b byte) []byte { return bytes.Repeat([]byte{b}, seal.KeyLen) }

// newKeyedOp builds a keyed bridge through the ABI's Go side.
func newKeyedOp(t testing.TB, role bridge.Role, key []byte, gen uint32, mode seal.Mode) int64 {
	t.Helper()
	cfg := bridge.Config{Role: role, PairID: 9, AutoRelease: true}
	if err := keysConfig(&cfg, key, gen, uint32(mode), 0); err != nil {
		t.Fatal(err)
	}
	id, code, err := opNewKeyed(cfg, time.Time{})
	if code != codeOK || err != nil {
		t.Fatalf("opNewKeyed: %d, %v", code, err)
	}
	t.Cleanup(func() { opFree(id) })
	return id
}

// keyEvents drains a handle's events and returns its key events.
func keyEvents(t *testing.T, id int64) []keyEvent {
	t.Helper()
	var out []keyEvent
	for {
		var got keyEvent
		code := opNextEvent(id, func(e *bridge.Event, gen uint32) {
			got = keyEvent{kind: e.Kind, at: e.At, epoch: uint32(e.Count), gen: gen}
		})
		if code == codeOK {
			return out
		}
		if got.kind == eventTxKey || got.kind == eventRxKey {
			out = append(out, got)
		}
	}
}

func hasKeyEvent(evs []keyEvent, kind bridge.EventKind, epoch, gen uint32) bool {
	for _, e := range evs {
		if e.kind == kind && e.epoch == epoch && e.gen == gen {
			return true
		}
	}
	return false
}

// TestKeyedPairThroughTheABI: two keyed bridges built through the ABI
// handshake, carry a write sealed (GCM and GMAC), rekey on request with
// an event on each side, and change to an installed, activated key
// generation, which the peer follows; key_state shows it all.
func TestKeyedPairThroughTheABI(t *testing.T) {
	for _, mode := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		t.Run(mode.String(), func(t *testing.T) {
			host := newKeyedOp(t, bridge.RoleHost, abiKey(7), 3, mode)
			gpu := newKeyedOp(t, bridge.RoleGPU, abiKey(7), 3, mode)
			buf := make([]byte, 1472)
			now := time.Microsecond
			step := func(d time.Duration) {
				for end := now + d; now < end; now += 100 * time.Microsecond {
					shuttleOps(t, host, gpu, now, buf)
					opOnTimer(host, now)
					opOnTimer(gpu, now)
				}
			}
			step(2 * time.Millisecond)
			if s, _ := opState(gpu); s != bridge.StateUp {
				t.Fatalf("keyed pair not up: %v", s)
			}
			w := mwr(0x40, 8)
			if code := opSendTLP(host, now, w); code != codeOK {
				t.Fatalf("send tlp: %s", codeName(code))
			}
			step(time.Millisecond)
			got := make([]byte, tlp.Header4DW+4096)
			n, code := opNextTLP(gpu, uint32(bridge.AcceptAll), got)
			if code != codeMore || !bytes.Equal(got[:n], w) {
				t.Fatalf("next tlp: %s, % x; want % x", codeName(code), got[:n], w)
			}
			k, _ := opKeyState(gpu)
			if !k.keyed || k.s.TxGeneration != 3 || k.c.FramesSealed == 0 || k.c.FramesOpened == 0 {
				t.Fatalf("key state %+v", k)
			}
			keyEvents(t, host)
			keyEvents(t, gpu)

			if code := opRekey(host); code != codeOK {
				t.Fatalf("rekey: %s", codeName(code))
			}
			step(time.Millisecond)
			if h, g := keyEvents(t, host), keyEvents(t, gpu); !hasKeyEvent(h, eventTxKey, 1, 3) || !hasKeyEvent(g, eventRxKey, 1, 3) {
				t.Fatalf("after rekey: host events %+v, GPU events %+v: want TX_KEY and RX_KEY epoch 1 gen 3", h, g)
			}

			for _, id := range []int64{host, gpu} {
				if code := opInstallKey(id, 4, abiKey(8)); code != codeOK {
					t.Fatalf("install key: %s", codeName(code))
				}
			}
			if code := opActivateKey(gpu); code != codeOK {
				t.Fatalf("activate key: %s", codeName(code))
			}
			// The host's previous receive key retires after its grace
			// (1 s) before the GPU side may move on.
			step(1500 * time.Millisecond)
			h, g := keyEvents(t, host), keyEvents(t, gpu)
			if !hasKeyEvent(g, eventTxKey, 1, 4) || !hasKeyEvent(h, eventRxKey, 1, 4) {
				t.Fatalf("after activating generation 4 on the GPU side: GPU events %+v, host events %+v", g, h)
			}
			if k, _ := opKeyState(host); k.s.TxGeneration != 4 {
				t.Fatalf("the host side did not follow to generation 4: %+v (events %+v)", k.s, h)
			}
			if s, _ := opState(host); s != bridge.StateUp {
				t.Fatalf("the key change took the link down: %v", s)
			}
		})
	}
}

// TestKeyRefusals: a key the bridge cannot take is DXPU_E_KEY (unkeyed
// bridge, wrong length, a generation not above the ones held), and a peer
// under another key gets nowhere: its frames are dropped as forged.
func TestKeyRefusals(t *testing.T) {
	plain := newOp(t, bridge.Config{Role: bridge.RoleHost, PairID: 9})
	keyed := newKeyedOp(t, bridge.RoleHost, abiKey(1), 5, seal.ModeGCM)
	for name, code := range map[string]int{
		"install on unkeyed":  opInstallKey(plain, 2, abiKey(2)),
		"activate on unkeyed": opActivateKey(plain),
		"rekey on unkeyed":    opRekey(plain),
		"short key":           opInstallKey(keyed, 6, abiKey(2)[:16]),
		"old generation":      opInstallKey(keyed, 5, abiKey(2)),
	} {
		if code != codeKey {
			t.Errorf("%s: %s, want DXPU_E_KEY", name, codeName(code))
		}
	}
	if k, _ := opKeyState(plain); k.keyed {
		t.Error("unkeyed bridge reports keys")
	}
	cfg := bridge.Config{Role: bridge.RoleGPU, PairID: 9}
	if err := keysConfig(&cfg, abiKey(1), 0, 0, 0); err == nil {
		t.Error("generation 0 accepted")
	}
	if err := keysConfig(&cfg, abiKey(1), 1, 3, 0); err == nil {
		t.Error("seal mode 3 accepted")
	}
	seeded := bridge.Config{Role: bridge.RoleGPU, PairID: 9, Seed: 7}
	if err := keysConfig(&seeded, abiKey(1), 1, 0, 0); err == nil || !strings.Contains(err.Error(), "seed 7 in a keyed bridge") {
		t.Errorf("a keyed bridge with seed 7 (predictable nonces): %v, want refused", err)
	}
	other := newKeyedOp(t, bridge.RoleGPU, abiKey(2), 5, seal.ModeGCM)
	buf := make([]byte, 1472)
	var dropped int
	for now := time.Microsecond; now < 5*time.Millisecond; now += 100 * time.Microsecond {
		for _, d := range [][2]int64{{keyed, other}, {other, keyed}} {
			for {
				n, code := opNextFrame(d[0], now, buf)
				if code != codeMore {
					break
				}
				if code := opHandleFrame(d[1], now, buf[:n]); code == codeFrame {
					dropped++
				}
			}
		}
	}
	k, _ := opKeyState(other)
	if s, _ := opState(other); s == bridge.StateUp || dropped == 0 || k.c.DroppedForged == 0 {
		t.Fatalf("a peer under another key: state %v, %d frames dropped, key state %+v", s, dropped, k.c)
	}
}
