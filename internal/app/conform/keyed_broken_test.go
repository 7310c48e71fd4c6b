package conform

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// sealShim is a test-only keyed peer with switchable faults: an unkeyed
// dxpu bridge whose transport it wraps, sealing what the bridge sends and
// opening what it receives as a keyed bridge does (key nonces in HELLO and
// HELLO-ACK, session keys from both sessions and key nonces), unless a
// fault says otherwise. Each fault breaks one KEY rule.
type sealShim struct {
	driver.Transport
	faults shimFaults

	mu        sync.Mutex
	ch        *seal.Channel
	secrets   []seal.Secret
	own, peer uint32
	ownNonce  [bridge.KeyNonceLen]byte
	peerNonce [bridge.KeyNonceLen]byte
	peerKnown bool
	start     time.Time
}

type shimFaults struct {
	plainKeepalive bool // KEY-2: its own KEEPALIVEs go out unsealed
	acceptPlain    bool // KEY-3: unsealed frames are taken
	noReplay       bool // KEY-3, KEY-5: frames open without a replay window (the key log's Unsealer)
	fixedNonce     bool // KEY-4: the same key nonce in every session
	hsUnderSession bool // KEY-5: HELLO-ACK sealed under the session keys once there are some
}

// shimSetup runs the kit keyed (generation 1, GCM) against an unkeyed
// bridge behind a sealShim with faults f.
func shimSetup(f shimFaults) setup {
	return setup{controlled: true,
		wrap: func(t driver.Transport) driver.Transport {
			s := &sealShim{Transport: t, faults: f, start: time.Now()}
			ch, err := seal.New(seal.Config{PairID: 42, Role: encap.RoleGPU, Mode: seal.ModeGCM, PreviousGraceTime: 50 * time.Millisecond,
				KeyLog: func(x seal.Secret) { s.secrets = append(s.secrets, x) }}, 1, testKey(1))
			if err != nil {
				panic(err)
			}
			s.ch = ch
			return s
		},
		bridge: &keyedTimers,
		opts: func(o *Options) {
			o.Timers = keyedTimers
			o.Keys = Keys{Key: testKey(1), Generation: 1, GraceTime: 50 * time.Millisecond}
		}}
}

// bind starts session keys once both sides' sessions and nonces are known.
func (s *sealShim) bind() {
	if s.own == 0 || !s.peerKnown {
		return
	}
	var local, peer [4 + bridge.KeyNonceLen]byte
	binary.BigEndian.PutUint32(local[:], s.own)
	copy(local[4:], s.ownNonce[:])
	binary.BigEndian.PutUint32(peer[:], s.peer)
	copy(peer[4:], s.peerNonce[:])
	_ = s.ch.StartSession(local[:], peer[:])
}

func (s *sealShim) Send(b []byte) error {
	s.mu.Lock()
	out, ok := s.seal(b)
	s.mu.Unlock()
	if !ok {
		return nil // the bridge's retransmission recovers it
	}
	return s.Transport.Send(out)
}

func (s *sealShim) seal(b []byte) ([]byte, bool) {
	hs := isHandshakeFrame(b)
	if hs && b[encap.HeaderLen] != byte(encap.CtlReset) {
		c, err := encap.ParseControl(b[encap.HeaderLen:])
		if err != nil {
			return nil, false
		}
		if c.Session != s.own {
			s.own = c.Session
			if !s.faults.fixedNonce {
				_, _ = rand.Read(s.ownNonce[:])
			} else {
				s.ownNonce = [bridge.KeyNonceLen]byte{0xfe}
			}
			s.bind()
		}
		b = append(append([]byte(nil), b...), s.ownNonce[:]...)
		encap.Header(b).SetBodyLen(encap.Header(b).BodyLen() + bridge.KeyNonceLen)
	}
	if hs && !(s.faults.hsUnderSession && s.ch.State().Session && b[encap.HeaderLen] == byte(encap.CtlHelloAck)) {
		out, err := s.ch.SealHandshake(nil, b, uint64(time.Now().UnixNano()))
		return out, err == nil
	}
	if s.faults.plainKeepalive && len(b) > encap.HeaderLen && encap.Header(b).Type() == encap.MsgControl && b[encap.HeaderLen] == byte(encap.CtlKeepalive) {
		return b, true
	}
	out, err := s.ch.Seal(nil, b)
	return out, err == nil
}

func (s *sealShim) Recv(buf []byte) (int, error) {
	for {
		n, err := s.Transport.Recv(buf)
		if err != nil {
			return n, err
		}
		s.mu.Lock()
		p := s.open(buf[:n])
		if p != nil {
			n = copy(buf, p)
		}
		s.mu.Unlock()
		if p != nil {
			return n, nil
		}
	}
}

func (s *sealShim) open(f []byte) []byte {
	if len(f) < encap.HeaderLen {
		return nil
	}
	if f[0]&seal.FlagSealed == 0 {
		if s.faults.acceptPlain {
			return append([]byte(nil), f...)
		}
		return nil
	}
	var p []byte
	if s.faults.noReplay {
		var err error
		if p, _, err = seal.NewUnsealer(s.secrets).Unseal(nil, f); err != nil {
			return nil
		}
	} else {
		var err error
		s.ch.Tick(time.Since(s.start))
		if p, err = s.ch.OpenFrame(f); err != nil {
			return nil
		}
		p = append([]byte(nil), p...)
	}
	if isHandshakeFrame(p) && p[encap.HeaderLen] != byte(encap.CtlReset) {
		h := encap.Header(p)
		if h.BodyLen() < encap.HelloLen+bridge.KeyNonceLen {
			return nil
		}
		c, err := encap.ParseControl(p[encap.HeaderLen:])
		if err != nil {
			return nil
		}
		var nonce [bridge.KeyNonceLen]byte
		copy(nonce[:], p[encap.HeaderLen+encap.HelloLen:])
		if !s.peerKnown || c.Session != s.peer || nonce != s.peerNonce {
			s.peer, s.peerNonce, s.peerKnown = c.Session, nonce, true
			s.bind()
		}
		h.SetBodyLen(h.BodyLen() - bridge.KeyNonceLen)
		p = p[:len(p)-bridge.KeyNonceLen]
	}
	return p
}
