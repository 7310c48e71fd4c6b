package predict

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/model"
)

// fabricOf assembles the fabric from the options or a profile.
func fabricOf(f *Options) (model.Fabric, error) {
	fab := model.Native
	rtt := f.AddedRTT
	if err := checkRTT("--added-rtt", rtt); err != nil {
		return fab, err
	}
	if f.NetworkRTTSet {
		if err := checkRTT("--rtt", f.NetworkRTT); err != nil {
			return fab, err
		}
		// The model re-times with what the fabric adds over native PCIe:
		// the network round trip plus the bridges' fixed cost, as the
		// emulator's fabric counts it.
		rtt = topo.Fabric{RTT: f.NetworkRTT}.AddedRoundTrip()
		f.RTTSet = true
	}
	link := f.LinkFlag
	if link == "" {
		link = "--link-gbps"
	}
	switch g := f.LinkGbps; {
	case math.IsNaN(g) || math.IsInf(g, 0) || g < 0 || g > model.MaxLinkGbps:
		return fab, usage("%s %g: want a number of Gbit/s from 0 (no limit) up to %d", link, g, model.MaxLinkGbps)
	}
	bw := f.LinkGbps * 1e9 / 8
	if f.TagsSet && (f.Tags < 1 || f.Tags > model.MaxTags) {
		return fab, usage("--tags %d: want 1..%d", f.Tags, model.MaxTags)
	}
	if f.MRRSSet && (f.MRRS < 128 || f.MRRS > 4096 || f.MRRS&(f.MRRS-1) != 0) {
		return fab, usage("--mrrs %d: want a power of two in 128..4096 bytes", f.MRRS)
	}
	fab.RTT, fab.Bandwidth, fab.Tags, fab.MRRS = rtt, bw, f.Tags, f.MRRS
	if f.Profile != "" {
		if st, err := os.Stat(f.Profile); err == nil && st.IsDir() {
			return fab, usage("--profile %s: a directory: a fabric profile is a file (the JSON object of 'dxpu bench fabric --json')", f.Profile)
		}
		pf, err := os.Open(f.Profile)
		if err != nil {
			return fab, apperr.Usage(err)
		}
		defer pf.Close()
		base := fab
		if fab, err = model.FabricFromProfile(pf, base); err != nil {
			if e := jsonfile.ExplainFile(err, f.Profile, "the JSON object of 'dxpu bench fabric --json'"); e != err {
				return base, apperr.Failed(e)
			}
			return base, apperr.Failed(fmt.Errorf("%s: %w", f.Profile, err))
		}
		// Flags given explicitly win over the profile.
		if f.RTTSet {
			fab.RTT = rtt
		}
		if f.BWSet {
			fab.Bandwidth = bw
		}
		if f.TagsSet {
			fab.Tags = f.Tags
		}
		if f.MRRSSet {
			fab.MRRS = f.MRRS
		}
	}
	if err := fab.Validate(); err != nil {
		return fab, usage("%w", err)
	}
	return fab, nil
}

// checkRTT refuses a round trip below 0 or above model.MaxRTT, naming
// flag and writing the value as `dxpu help units` does (us, not µs).
func checkRTT(flag string, d time.Duration) error {
	switch {
	case d < 0:
		return usage("%s %s: must not be negative", flag, units.Duration(d))
	case d > model.MaxRTT:
		return usage("%s %s: want at most %s", flag, units.Duration(d), units.Duration(model.MaxRTT))
	}
	return nil
}

func parseSweep(s string) ([]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	if s == "default" {
		return model.DefaultSweep, nil
	}
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		// One vocabulary: durations carry their unit, as --rtt does.
		if p := strings.TrimSpace(part); p != "0" && strings.TrimLeft(p, "0123456789.") == "" {
			return nil, usage("--sweep %q: %q has no unit; give durations such as 2us,5us,10us", s, p)
		}
		d, err := model.ParseRTT(part)
		if err != nil {
			return nil, usage("--sweep: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}
