package seal

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/tlp/encap"
)

// ErrKeyLog is the error of a key log line that does not parse.
var ErrKeyLog = errors.New("bad key log line")

// Key log labels, the first word of a line.
const (
	KeyLogHandshake = "DXPU_HANDSHAKE_SECRET"
	KeyLogSession   = "DXPU_SESSION_SECRET"
)

// Secret is one traffic secret a channel derived, as Config.KeyLog hands
// it out: the HKDF PRK every AEAD key of one pair, generation and either
// the handshake or one session derives from (see Keys in the package doc).
// With it a frame opens offline (Unsealer) as TLS's SSLKEYLOGFILE opens a
// capture; the pair key itself is never in it.
type Secret struct {
	Handshake  bool       // the handshake PRK; else a session PRK
	PairID     uint32     // 24 bits
	Generation uint32     // the pair key generation it came from
	Role       encap.Role // the side that logged it (both derive the same)
	Mode       Mode
	// HostNonce and GPUNonce are the session nonces that bind a session
	// secret (empty for the handshake secret): they tell sessions apart.
	HostNonce, GPUNonce []byte
	PRK                 []byte // 32 bytes
}

// AppendLine appends s as one key log line (with its newline):
//
//	DXPU_HANDSHAKE_SECRET pair=1 gen=1 role=host mode=aes-256-gcm secret=<64 hex>
//	DXPU_SESSION_SECRET pair=1 gen=1 role=host mode=aes-256-gcm host_nonce=<hex> gpu_nonce=<hex> secret=<64 hex>
func (s *Secret) AppendLine(b []byte) []byte {
	label := KeyLogSession
	if s.Handshake {
		label = KeyLogHandshake
	}
	b = fmt.Appendf(b, "%s pair=%d gen=%d role=%v mode=%v", label, s.PairID, s.Generation, s.Role, s.Mode)
	if !s.Handshake {
		b = fmt.Appendf(b, " host_nonce=%x gpu_nonce=%x", s.HostNonce, s.GPUNonce)
	}
	return fmt.Appendf(b, " secret=%x\n", s.PRK)
}

// ParseKeyLogLine reads one line AppendLine wrote (without its newline).
func ParseKeyLogLine(line string) (Secret, error) {
	var s Secret
	words := strings.Fields(line)
	if len(words) == 0 {
		return s, fmt.Errorf("%w: empty", ErrKeyLog)
	}
	switch words[0] {
	case KeyLogHandshake:
		s.Handshake = true
	case KeyLogSession:
	default:
		return s, fmt.Errorf("%w: label %q, want %s or %s", ErrKeyLog, words[0], KeyLogHandshake, KeyLogSession)
	}
	seen := map[string]bool{}
	for _, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok || seen[k] {
			return s, fmt.Errorf("%w: %q is not a new key=value", ErrKeyLog, w)
		}
		seen[k] = true
		var err error
		switch k {
		case "pair":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 24)
			s.PairID = uint32(n)
		case "gen":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 32)
			s.Generation = uint32(n)
		case "role":
			var ok bool
			if s.Role, ok = encap.ParseRole(v); !ok {
				err = errors.New("want host or gpu")
			}
		case "mode":
			s.Mode, err = ParseMode(v)
		case "host_nonce":
			s.HostNonce, err = hexNonce(v)
		case "gpu_nonce":
			s.GPUNonce, err = hexNonce(v)
		case "secret":
			s.PRK, err = hex.DecodeString(v)
			if err == nil && len(s.PRK) != KeyLen {
				err = fmt.Errorf("%d bytes, want %d", len(s.PRK), KeyLen)
			}
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return s, fmt.Errorf("%w: %s=%q: %w", ErrKeyLog, k, v, err)
		}
	}
	want := []string{"pair", "gen", "role", "mode", "secret"}
	if !s.Handshake {
		want = append(want, "host_nonce", "gpu_nonce")
	}
	for _, k := range want {
		if !seen[k] {
			return s, fmt.Errorf("%w: %s lacks %s=", ErrKeyLog, words[0], k)
		}
	}
	return s, nil
}

func hexNonce(v string) ([]byte, error) {
	b, err := hex.DecodeString(v)
	if err == nil && (len(b) < MinNonceLen || len(b) > MaxNonceLen) {
		err = fmt.Errorf("%d bytes, want %d to %d", len(b), MinNonceLen, MaxNonceLen)
	}
	return b, err
}

// ReadKeyLog reads a key log: one secret a line; blank lines and lines
// starting with # are skipped. A line that does not parse is an error
// naming its number. The same secret logged twice (both sides of a pair
// logging to one file) is kept once.
func ReadKeyLog(r io.Reader) ([]Secret, error) {
	var out []Secret
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := ParseKeyLogLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		key := fmt.Sprintf("%t %d %d %x", s.Handshake, s.PairID, s.Generation, s.PRK)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the key log: %w", err)
	}
	return out, nil
}

// logSecret hands a derived PRK to Config.KeyLog, if set. The PRK is
// copied: the channel clears its own when the session ends.
func (c *Channel) logSecret(handshake bool, gen uint32, prk []byte) {
	if c.cfg.KeyLog == nil {
		return
	}
	s := Secret{Handshake: handshake, PairID: c.cfg.PairID, Generation: gen, Role: c.cfg.Role, Mode: c.cfg.Mode,
		PRK: append([]byte(nil), prk...)}
	if !handshake {
		s.HostNonce = append([]byte(nil), c.nonceHost[:c.lenHost]...)
		s.GPUNonce = append([]byte(nil), c.nonceGPU[:c.lenGPU]...)
	}
	c.cfg.KeyLog(s)
}
