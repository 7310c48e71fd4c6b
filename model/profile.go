package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/dxpu/dxpu/internal/strictjson"
)

// MaxProfileBytes bounds a fabric profile (one is a few KiB).
const MaxProfileBytes = 4 << 20

// FabricFromProfile reads the fabric from the JSON of `dxpu bench fabric
// --json`, starting from base for anything the profile does not say.
//
// The added round trip is, in order of preference: the measured MMIO read
// latency over the fabric minus the native one ({"mmio_read_us":
// {"native": N, "fabric": F}}: a read is one round trip, so F-N is what the
// fabric adds, bridges and switch included); else "added_rtt_us"; else
// "rtt_us", at most MaxRTT. The link rate is "link_gbps" (or "gbit",
// "bandwidth_gbps": older spellings) in Gbit/s, at most MaxLinkGbps;
// "tags" and "mrrs_bytes" (or "mrrs") are the read-request limits. These keys are
// read at the top level or inside an object named "fabric" or "config".
func FabricFromProfile(r io.Reader, base Fabric) (Fabric, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxProfileBytes+1))
	if err != nil {
		return base, fmt.Errorf("model: fabric profile: %w", err)
	}
	if len(data) > MaxProfileBytes {
		return base, fmt.Errorf("model: fabric profile: over %d bytes: not the JSON of 'dxpu bench fabric --json'", MaxProfileBytes)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return base, fmt.Errorf("model: fabric profile: %w", err)
	}
	// A key given twice (encoding/json keeps the last) or a second
	// object after the first would be read without a word.
	if err := strictjson.Check(data, nil, false); err != nil {
		return base, fmt.Errorf("model: fabric profile: %w", err)
	}
	f := base
	scopes := []map[string]any{doc}
	for _, k := range []string{"fabric", "config"} {
		if m, ok := doc[k].(map[string]any); ok {
			scopes = append(scopes, m)
		}
	}
	num := func(keys ...string) (float64, bool, error) {
		for _, s := range scopes {
			for _, k := range keys {
				v, ok := s[k]
				if !ok {
					continue
				}
				n, isNum := v.(json.Number)
				if !isNum {
					return 0, false, fmt.Errorf("model: fabric profile: %q is not a number", k)
				}
				x, err := n.Float64()
				if err != nil || x < 0 || math.IsInf(x, 0) {
					return 0, false, fmt.Errorf("model: fabric profile: %q = %s is not a non-negative number", k, n)
				}
				return x, true, nil
			}
		}
		return 0, false, nil
	}
	if m, isObj := doc["mmio_read_us"].(map[string]any); isObj {
		nat, ok1 := m["native"].(json.Number)
		fab, ok2 := m["fabric"].(json.Number)
		if !ok1 || !ok2 {
			return base, fmt.Errorf("model: fabric profile: mmio_read_us needs numbers native and fabric")
		}
		a, err1 := nat.Float64()
		b, err2 := fab.Float64()
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return base, fmt.Errorf("model: fabric profile: mmio_read_us fabric %s below native %s", fab, nat)
		}
		if b-a > float64(MaxRTT/time.Microsecond) {
			return base, fmt.Errorf("model: fabric profile: mmio_read_us adds %g us: %w", b-a, ErrRTTRange)
		}
		f.RTT = time.Duration((b - a) * float64(time.Microsecond))
	} else if rtt, ok, err := num("added_rtt_us", "rtt_us"); err != nil {
		return base, err
	} else if ok {
		if rtt > float64(MaxRTT/time.Microsecond) {
			return base, fmt.Errorf("model: fabric profile: RTT %g us: %w", rtt, ErrRTTRange)
		}
		f.RTT = time.Duration(rtt * float64(time.Microsecond))
	} else {
		return base, fmt.Errorf("model: fabric profile: no mmio_read_us, added_rtt_us or rtt_us")
	}
	if bw, ok, err := num("link_gbps", "gbit", "bandwidth_gbps"); err != nil {
		return base, err
	} else if bw > MaxLinkGbps {
		return base, fmt.Errorf("model: fabric profile: link %g Gbit/s: want at most %d", bw, MaxLinkGbps)
	} else if ok {
		f.Bandwidth = bw * 1e9 / 8
	}
	if v, ok, err := num("tags"); err != nil {
		return base, err
	} else if ok {
		f.Tags = int(v)
	}
	if v, ok, err := num("mrrs_bytes", "mrrs"); err != nil {
		return base, err
	} else if ok {
		f.MRRS = int(v)
	}
	if err := f.Validate(); err != nil {
		return base, fmt.Errorf("model: fabric profile: %w", err)
	}
	return f, nil
}
