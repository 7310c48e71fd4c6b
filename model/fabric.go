package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// Fabric is what the disaggregation fabric adds between a host and its GPU,
// on top of a GPU in the host's own slot: added round-trip latency, the link
// rate, and the read-request limits that bound host-to-device DMA.
type Fabric struct {
	// RTT is the added round trip (host to GPU and back) over native PCIe.
	RTT time.Duration `json:"rtt_ns"`
	// Bandwidth is the link rate in bytes per second; 0 means no limit
	// beyond what the trace itself achieved natively.
	Bandwidth float64 `json:"bandwidth_bytes_per_s"`
	// Tags is the number of outstanding non-posted read requests the GPU may
	// keep in flight (PCIe tags: 32, 256 or 768 with 10-bit tags).
	Tags int `json:"tags"`
	// MRRS is the maximum read request size in bytes (128 to 4096).
	MRRS int `json:"mrrs_bytes"`
}

// Defaults for the read-request limits of a data-center GPU behind the fabric.
const (
	DefaultTags = 256
	DefaultMRRS = 512
)

// MaxTags is the most outstanding DMA reads a GPU keeps in flight: what
// 10-bit tags allow (256..1023), as every command's --tags takes it.
const MaxTags = 768

// Bounds of what a fabric's inputs may say (flags, --sweep, profiles):
// a round trip beyond a second or a link beyond 10 Tbit/s describes no
// fabric, and spans re-timed with one would only mislead (an RTT of
// hours printed an overhead of 10^11 %).
const (
	MaxRTT      = time.Second
	MaxLinkGbps = 10000
)

// Native is the fabric of a GPU in the host's own slot: nothing added.
var Native = Fabric{Tags: DefaultTags, MRRS: DefaultMRRS}

// WithRTT returns f with its added round trip set to rtt.
func (f Fabric) WithRTT(rtt time.Duration) Fabric { f.RTT = rtt; return f }

// Validate reports a fabric that the equations cannot use.
func (f Fabric) Validate() error {
	switch {
	case f.RTT < 0:
		return fmt.Errorf("model: negative RTT %s", sim.FormatDuration(f.RTT))
	case f.Bandwidth < 0 || math.IsNaN(f.Bandwidth) || math.IsInf(f.Bandwidth, 0):
		return fmt.Errorf("model: invalid bandwidth %v B/s", f.Bandwidth)
	case f.Tags < 1 || f.Tags > MaxTags:
		return fmt.Errorf("model: tags %d out of range 1..%d", f.Tags, MaxTags)
	case f.MRRS < 128 || f.MRRS > 4096 || f.MRRS&(f.MRRS-1) != 0:
		return fmt.Errorf("model: MRRS %d is not a power of two in 128..4096", f.MRRS)
	}
	return nil
}

// OneWay is half the added round trip: a posted write's extra latency.
func (f Fabric) OneWay() time.Duration { return f.RTT / 2 }

// LaunchCost is what a launch adds when its stream is idle: the doorbell
// (a posted MMIO write, one way) and the GPU's fetch of the command from
// host memory (a DMA read, one round trip).
func (f Fabric) LaunchCost() time.Duration { return f.OneWay() + f.RTT }

// SyncCost is what a synchronization adds when the CPU is waiting: the
// GPU's completion notification (a semaphore release, a posted DMA write to
// host memory) travels one way.
func (f Fabric) SyncCost() time.Duration { return f.OneWay() }

// MMIOReadCost is the CPU stall of one MMIO read of a GPU register: a full
// round trip, reads being non-posted.
func (f Fabric) MMIOReadCost() time.Duration { return f.RTT }

// H2DRate is the host-to-device DMA rate in bytes per second:
// min(link, tags x MRRS / RTT), +Inf when neither bounds it.
func (f Fabric) H2DRate() float64 {
	rate := math.Inf(1)
	if f.Bandwidth > 0 {
		rate = f.Bandwidth
	}
	if f.RTT > 0 && f.Tags > 0 && f.MRRS > 0 {
		rate = math.Min(rate, float64(f.Tags)*float64(f.MRRS)/f.RTT.Seconds())
	}
	return rate
}

// D2HRate is the device-to-host DMA rate: posted writes need no tags, so
// only the link bounds it (+Inf when unset).
func (f Fabric) D2HRate() float64 {
	if f.Bandwidth > 0 {
		return f.Bandwidth
	}
	return math.Inf(1)
}

// transfer is bytes at rate as a duration (0 for an infinite rate).
func transfer(bytes int64, rate float64) time.Duration {
	if bytes <= 0 || math.IsInf(rate, 1) || rate <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(float64(bytes) / rate * 1e9))
}

// CopyTime is the duration of a copy of the given direction, size and
// native duration behind f:
//
//	H2D: max(native, bytes / H2DRate) + RTT
//	D2H: max(native, bytes / D2HRate) + RTT/2
//	otherwise native.
func (f Fabric) CopyTime(dir CopyDir, bytes int64, native time.Duration) time.Duration {
	switch dir {
	case H2D:
		return max(native, transfer(bytes, f.H2DRate())) + f.RTT
	case D2H:
		return max(native, transfer(bytes, f.D2HRate())) + f.OneWay()
	}
	return native
}

// ParseBandwidth reads a link rate such as "100Gbit", "100Gbps", "12.5GB/s",
// "400G" (bits) or "0" (no limit) and returns bytes per second.
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" || t == "0" {
		return 0, nil
	}
	lower := strings.ToLower(t)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"gbit/s", 1e9 / 8}, {"mbit/s", 1e6 / 8}, {"tbit/s", 1e12 / 8},
		{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"tbit", 1e12 / 8},
		{"gbps", 1e9 / 8}, {"mbps", 1e6 / 8}, {"tbps", 1e12 / 8},
		{"gb/s", 1e9}, {"mb/s", 1e6}, {"tb/s", 1e12},
		{"gib/s", 1 << 30}, {"mib/s", 1 << 20},
		{"kbit/s", 1e3 / 8}, {"kbit", 1e3 / 8}, {"kbps", 1e3 / 8},
		{"g", 1e9 / 8}, {"m", 1e6 / 8}, {"t", 1e12 / 8}, {"k", 1e3 / 8},
	}
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSpace(t[:len(t)-len(u.suffix)]), 64)
			if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("model: bandwidth %q: want a number with a unit such as 100Gbit or 12.5GB/s", s)
			}
			bw := v * u.mult
			if math.IsInf(bw, 0) {
				return 0, fmt.Errorf("model: bandwidth %q is beyond any link", s)
			}
			return bw, nil
		}
	}
	return 0, fmt.Errorf("model: bandwidth %q: unknown unit (use Gbit, Gbps, GB/s, Mbit, ...)", s)
}

// ParsePercent reads "10%" or "10" as 10.
func ParsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("model: target %q: want a positive percentage such as 10%%", s)
	}
	return v, nil
}

// ErrRTTRange is returned (wrapped) by ParseRTT for a round trip below 0
// or above MaxRTT.
var ErrRTTRange = fmt.Errorf("want 0 up to %s", sim.FormatDuration(MaxRTT))

// ParseRTT reads a duration such as "5us", "0.5ms" or a bare number of
// microseconds, from 0 up to MaxRTT.
func ParseRTT(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(t, 64); err == nil {
		if v < 0 || math.IsNaN(v) || v > float64(MaxRTT/time.Microsecond) {
			return 0, fmt.Errorf("model: RTT %q us: %w", s, ErrRTTRange)
		}
		return time.Duration(v * float64(time.Microsecond)), nil
	}
	d, err := time.ParseDuration(strings.ReplaceAll(t, "µ", "u"))
	if err != nil {
		return 0, fmt.Errorf("model: RTT %q: %w", s, err)
	}
	if d < 0 || d > MaxRTT {
		return 0, fmt.Errorf("model: RTT %s: %w", sim.FormatDuration(d), ErrRTTRange)
	}
	return d, nil
}
