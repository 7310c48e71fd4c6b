package bridged

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
)

// registry holds the daemon's metrics: the runner's counters and, on the
// host side, the NetTLP adapter's, labelled with pair and role.
func (d *Daemon) registry(o *Options) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"pair": strconv.FormatUint(uint64(o.Pair), 10), "role": o.Role.String()}
	reg.MustRegister(driver.NewCollector(d.runner, labels))
	if d.host != nil {
		registerNettlpStats(reg, d.host.Adapter().Stats(), labels)
	}
	return reg
}

// registerNettlpStats exports a NetTLP adapter's counters.
func registerNettlpStats(reg *prometheus.Registry, s *nettlp.Stats, labels prometheus.Labels) {
	for _, m := range []struct {
		name, help string
		v          func() uint64
	}{
		{"dxpu_nettlp_datagrams_total", "NetTLP datagrams received from the host", s.Datagrams.Load},
		{"dxpu_nettlp_tlps_sent_total", "TLPs sent to the host in NetTLP datagrams", s.Completions.Load},
		{"dxpu_nettlp_malformed_total", "datagrams or TLPs from the host that could not be delivered", s.Malformed.Load},
		{"dxpu_nettlp_ignored_total", "datagrams from addresses other than the host's adapter", s.Ignored.Load},
		{"dxpu_nettlp_send_errors_total", "datagrams to the host the socket refused", s.SendErrors.Load},
	} {
		v := m.v
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help, ConstLabels: labels},
			func() float64 { return float64(v()) }))
	}
}
