package predict

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/model"
)

// fabricOf assembles the fabric from the options or a profile.
func fabricOf(f *Options) (model.Fabric, error) {
	fab := model.Native
	rtt, err := model.ParseRTT(f.RTT)
	if err != nil {
		return fab, usage("--added-rtt: %v", err)
	}
	if f.NetworkRTTSet {
		if f.NetworkRTT < 0 {
			return fab, usage("--rtt %v: must not be negative", f.NetworkRTT)
		}
		// The model re-times with what the fabric adds over native PCIe:
		// the network round trip plus the bridges' fixed cost, as the
		// emulator's fabric counts it.
		rtt = topo.Fabric{RTT: f.NetworkRTT}.AddedRoundTrip()
		f.RTTSet = true
	}
	bw, err := model.ParseBandwidth(f.BW)
	if err != nil {
		return fab, usage("--bw: %v", err)
	}
	fab.RTT, fab.Bandwidth, fab.Tags, fab.MRRS = rtt, bw, f.Tags, f.MRRS
	if f.Profile != "" {
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
		return fab, usage("%v", err)
	}
	return fab, nil
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
			return nil, usage("--sweep: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}
