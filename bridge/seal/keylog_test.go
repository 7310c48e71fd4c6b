package seal_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestKeyLogOpensCapture: the secrets one side logs open, offline, every
// frame both sides sealed (both directions, the handshake key, more than
// 256 epochs so the 8-bit epoch wraps, a second key generation), giving
// back the plain frames byte for byte; frames of an unlogged session or
// pair are refused with their reason. The log never holds the pair key.
func TestKeyLogOpensCapture(t *testing.T) {
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		t.Run(m.String(), func(t *testing.T) {
			var log []byte
			hc := seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: m, RekeyAfter: 2, PreviousGrace: 1,
				KeyLog: func(s seal.Secret) { log = s.AppendLine(log) }}
			gc := seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: m, RekeyAfter: 2, PreviousGrace: 1}
			host, err := seal.New(hc, 1, testKey(0))
			if err != nil {
				t.Fatal(err)
			}
			gpu, err := seal.New(gc, 1, testKey(0))
			if err != nil {
				t.Fatal(err)
			}
			type rec struct{ sealed, plain []byte }
			var caught []rec
			hello := helloFrame(encap.CtlHello)
			s, err := gpu.SealHandshake(nil, hello, 1000)
			if err != nil {
				t.Fatal(err)
			}
			caught = append(caught, rec{s, hello})
			if err := host.StartSession(hostNonce, gpuNonce); err != nil {
				t.Fatal(err)
			}
			if err := gpu.StartSession(gpuNonce, hostNonce); err != nil {
				t.Fatal(err)
			}
			send := func(from, to *seal.Channel, seq uint32) {
				t.Helper()
				p := plainFrame(encap.MsgTLP, seq, []byte{0, 12, 0, 0, 0, 1, 1, 0, 5, 0x0f, 0xf0, 0, byte(seq >> 8), byte(seq)})
				s, err := from.Seal(nil, p)
				if err != nil {
					t.Fatalf("seal %d: %v", seq, err)
				}
				caught = append(caught, rec{s, p})
				if _, err := to.Open(append([]byte(nil), s...)); err != nil {
					t.Fatalf("open %d: %v", seq, err)
				}
			}
			for i := range uint32(700) {
				if i == 400 {
					for _, c := range []*seal.Channel{host, gpu} {
						if err := c.InstallKey(2, testKey(0x40)); err != nil {
							t.Fatal(err)
						}
						c.ActivateKey()
					}
				}
				send(host, gpu, i)
				send(gpu, host, i)
			}
			if st := host.State(); st.TxEpoch < 300 || st.TxGeneration != 2 {
				t.Fatalf("the traffic should pass 256 epochs and move to generation 2: %+v", st)
			}
			if bytes.Contains(log, []byte(hex.EncodeToString(testKey(0)))) || bytes.Contains(log, []byte(hex.EncodeToString(testKey(0x40)))) {
				t.Fatal("the key log holds a pair key")
			}
			secrets, err := seal.ReadKeyLog(bytes.NewReader(log))
			if err != nil {
				t.Fatal(err)
			}
			// Generation 1 and 2: a handshake and a session secret each.
			if len(secrets) != 4 {
				t.Fatalf("%d secrets logged, want 4:\n%s", len(secrets), log)
			}
			u := seal.NewUnsealer(secrets)
			roles := map[encap.Role]int{}
			for i, r := range caught {
				in := append([]byte(nil), r.sealed...)
				got, o, err := u.Unseal(nil, in)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(got, r.plain) {
					t.Fatalf("frame %d (%v) unsealed to\n%x, want\n%x", i, o, got, r.plain)
				}
				if !bytes.Equal(in, r.sealed) {
					t.Fatalf("frame %d: Unseal changed its input", i)
				}
				roles[o.Role]++
			}
			if roles[encap.RoleHost] != 700 || roles[encap.RoleGPU] != 701 {
				t.Fatalf("senders %v, want 700 host, 701 gpu", roles)
			}

			// Another session of the same pair, not logged.
			h2, g2 := pair(t, m, nil)
			s2, err := h2.Seal(nil, plainFrame(encap.MsgTLP, 1, nil))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := u.Unseal(nil, s2); !errors.Is(err, seal.ErrNoSecretOpens) {
				t.Fatalf("unlogged session: %v, want ErrNoSecretOpens", err)
			}
			_ = g2
			other := append([]byte(nil), s2...)
			encap.Header(other).SetPairID(7)
			if _, _, err := u.Unseal(nil, other); !errors.Is(err, seal.ErrNoSecret) || !strings.Contains(err.Error(), "pair 7") {
				t.Fatalf("unlogged pair: %v, want ErrNoSecret naming pair 7", err)
			}
			if _, _, err := u.Unseal(nil, plainFrame(encap.MsgTLP, 1, nil)); !errors.Is(err, seal.ErrNotSealed) {
				t.Fatalf("plain frame: %v, want ErrNotSealed", err)
			}
		})
	}
}

// TestKeyLogLines: a line round-trips; a bad line names what is wrong.
func TestKeyLogLines(t *testing.T) {
	s := seal.Secret{PairID: 0xffffff, Generation: 7, Role: encap.RoleGPU, Mode: seal.ModeGMAC,
		HostNonce: []byte{1, 2, 3, 4}, GPUNonce: []byte{5, 6, 7, 8, 9}, PRK: testKey(3)}
	line := string(s.AppendLine(nil))
	want := "DXPU_SESSION_SECRET pair=16777215 gen=7 role=gpu mode=aes-256-gmac host_nonce=01020304 gpu_nonce=0506070809 secret=" +
		hex.EncodeToString(testKey(3)) + "\n"
	if line != want {
		t.Fatalf("line\n%q, want\n%q", line, want)
	}
	got, err := seal.ParseKeyLogLine(strings.TrimSuffix(line, "\n"))
	if err != nil || got.PairID != s.PairID || got.Generation != 7 || got.Role != encap.RoleGPU || got.Mode != seal.ModeGMAC ||
		!bytes.Equal(got.HostNonce, s.HostNonce) || !bytes.Equal(got.GPUNonce, s.GPUNonce) || !bytes.Equal(got.PRK, s.PRK) || got.Handshake {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	for _, bad := range []struct{ line, want string }{
		{"CLIENT_RANDOM 00 11", "label"},
		{"DXPU_HANDSHAKE_SECRET pair=1 gen=1 role=host mode=gcm", "lacks secret="},
		{"DXPU_HANDSHAKE_SECRET pair=16777216 gen=1 role=host mode=gcm secret=00", "pair="},
		{"DXPU_HANDSHAKE_SECRET pair=1 gen=1 role=host mode=gcm secret=0011", "2 bytes, want 32"},
		{"DXPU_SESSION_SECRET pair=1 gen=1 role=host mode=gcm secret=" + hex.EncodeToString(testKey(0)), "lacks host_nonce="},
		{"DXPU_HANDSHAKE_SECRET pair=1 pair=2", "not a new key=value"},
		{"DXPU_HANDSHAKE_SECRET pair=1 gen=1 role=switch mode=gcm", "role="},
	} {
		if _, err := seal.ParseKeyLogLine(bad.line); !errors.Is(err, seal.ErrKeyLog) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want ErrKeyLog naming %q", bad.line, err, bad.want)
		}
	}
	if _, err := seal.ReadKeyLog(strings.NewReader("# comment\n\n" + line + "bogus\n")); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("ReadKeyLog of a bad 4th line: %v", err)
	}
}
