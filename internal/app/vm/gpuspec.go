package vm

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/bridged"
)

// ParseGPU reads a remote GPU as `dxpu vm run --gpu` gives it,
// pair=N,listen=IP:PORT,peer=IP:PORT,key=FILE (key: the pair key file;
// insecure runs the pair unkeyed instead), and opens its UDP transport.
// Errors name the --gpu value and the key at fault.
func ParseGPU(s string, insecure bool) (*RemoteGPU, error) {
	var pair uint64
	var listen, peer netip.AddrPort
	var key []byte
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		var err error
		switch {
		case !ok:
			return nil, fmt.Errorf("--gpu %q: %q is not key=value", s, kv)
		case k == "pair":
			pair, err = strconv.ParseUint(v, 0, 32)
			if err == nil && (pair == 0 || pair >= 1<<24) {
				err = fmt.Errorf("want 1..16777215")
			}
		case k == "listen":
			listen, err = netip.ParseAddrPort(v)
		case k == "peer":
			peer, err = netip.ParseAddrPort(v)
		case k == "key":
			key, err = bridged.LoadKeyFile(v)
		default:
			return nil, fmt.Errorf("--gpu %q: unknown key %q (want pair, listen, peer, key)", s, k)
		}
		if err != nil {
			return nil, fmt.Errorf("--gpu %q: %s=%q: %v", s, k, v, err)
		}
	}
	if pair == 0 || !listen.IsValid() || !peer.IsValid() {
		return nil, fmt.Errorf("--gpu %q: pair, listen and peer are all needed", s)
	}
	switch {
	case key == nil && !insecure:
		return nil, fmt.Errorf("--gpu %q: key=FILE is needed (the pair key), or --insecure-no-keys for a lab", s)
	case key != nil && insecure:
		return nil, fmt.Errorf("--gpu %q: key= and --insecure-no-keys exclude each other", s)
	}
	bc := DefaultBridge(uint32(pair))
	bc.Key, bc.RequireKeys = key, !insecure
	c, err := udp.Listen(listen, peer)
	if err != nil {
		return nil, fmt.Errorf("--gpu %q: %w", s, err)
	}
	return &RemoteGPU{Transport: c, Bridge: bc}, nil
}
