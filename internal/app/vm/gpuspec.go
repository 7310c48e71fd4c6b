package vm

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/bridged"
)

// DefaultKeyGeneration numbers a pair key file's key when --gpu gives no
// gen=: the same default as `dxpu bridge --key-generation`, since both
// sides must seal under the same generation (generation 0 is no key's: the
// manager and the agent API number keys from 1).
const DefaultKeyGeneration = 1

// GPUSpec is one `dxpu vm run --gpu` value, parsed.
type GPUSpec struct {
	Pair          uint32
	Listen, Peer  netip.AddrPort
	Key           []byte // nil: unkeyed (--insecure-no-keys)
	KeyGeneration uint32
}

// ParseGPUSpec reads pair=N,listen=IP:PORT,peer=IP:PORT,key=FILE[,gen=N]
// (key: the pair key file, gen its generation, default
// DefaultKeyGeneration; insecure runs the pair unkeyed instead). Errors
// name the --gpu value and the key at fault.
func ParseGPUSpec(s string, insecure bool) (GPUSpec, error) {
	var pair, gen uint64
	var sp GPUSpec
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		var err error
		switch {
		case !ok:
			return sp, fmt.Errorf("--gpu %q: %q is not key=value", s, kv)
		case seen[k]:
			// The last one would win, silently: pair=1,...,pair=2 booted
			// a guest that waited for a pair nobody ran.
			return sp, fmt.Errorf("--gpu %q: %s= given twice", s, k)
		case k == "pair":
			pair, err = strconv.ParseUint(v, 0, 32)
			if err == nil && (pair == 0 || pair >= 1<<24) {
				err = fmt.Errorf("want 1..16777215")
			}
		case k == "listen":
			sp.Listen, err = netip.ParseAddrPort(v)
		case k == "peer":
			sp.Peer, err = netip.ParseAddrPort(v)
		case k == "key":
			sp.Key, err = bridged.LoadKeyFile(v)
		case k == "gen":
			gen, err = strconv.ParseUint(v, 0, 32)
			if err == nil && gen == 0 {
				err = fmt.Errorf("want 1..4294967295, the GPU side's --key-generation")
			}
		default:
			return sp, fmt.Errorf("--gpu %q: unknown key %q (want pair, listen, peer, key, gen)", s, k)
		}
		if err != nil {
			return sp, fmt.Errorf("--gpu %q: %s=%q: %v", s, k, v, err)
		}
		seen[k] = true
	}
	if pair == 0 || !sp.Listen.IsValid() || !sp.Peer.IsValid() {
		return sp, fmt.Errorf("--gpu %q: pair, listen and peer are all needed", s)
	}
	switch {
	case sp.Key == nil && !insecure:
		return sp, fmt.Errorf("--gpu %q: key=FILE is needed (the pair key), or --insecure-no-keys for a lab", s)
	case sp.Key != nil && insecure:
		return sp, fmt.Errorf("--gpu %q: key= and --insecure-no-keys exclude each other", s)
	case sp.Key == nil && gen != 0:
		return sp, fmt.Errorf("--gpu %q: gen= numbers the key of key=FILE, and there is none", s)
	}
	sp.Pair = uint32(pair)
	if sp.Key != nil {
		sp.KeyGeneration = DefaultKeyGeneration
		if gen != 0 {
			sp.KeyGeneration = uint32(gen)
		}
	}
	return sp, nil
}

// Bridge returns the host-side bridge configuration of the spec.
func (sp GPUSpec) Bridge() bridge.Config {
	bc := DefaultBridge(sp.Pair)
	bc.Key, bc.KeyGeneration, bc.RequireKeys = sp.Key, sp.KeyGeneration, sp.Key != nil
	return bc
}

// ParseGPU reads a remote GPU as `dxpu vm run --gpu` gives it (see
// ParseGPUSpec) and opens its UDP transport.
func ParseGPU(s string, insecure bool) (*RemoteGPU, error) {
	sp, err := ParseGPUSpec(s, insecure)
	if err != nil {
		return nil, err
	}
	c, err := udp.Listen(sp.Listen, sp.Peer)
	if err != nil {
		return nil, fmt.Errorf("--gpu %q: %w", s, err)
	}
	return &RemoteGPU{Transport: c, Bridge: sp.Bridge()}, nil
}
