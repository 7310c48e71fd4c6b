package bridgeagent

import (
	"cmp"
	"net"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
)

// The agent's /metrics (Options.Metrics, `--metrics`): every programmed
// pair's bridge counters through the collector `dxpu bridge --metrics`
// serves (driver.Collector), labelled pair and role, and the agent's own
// (dxpu_agent_*, labelled role). The package documentation lists them.

// metricsCollector exports a's metrics. It is unchecked (Describe sends
// nothing): the pairs, and so the series, come and go.
type metricsCollector struct {
	a                                *Agent
	pairs, pairsUp, pairsSteered     *prometheus.Desc
	droppedUnknown, droppedMalformed *prometheus.Desc
	droppedOverflow                  *prometheus.Desc
}

// Registry returns a registry of the agent's metrics (what its --metrics
// server serves).
func (a *Agent) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.collector())
	return reg
}

// collector returns the collector of a's metrics.
func (a *Agent) collector() *metricsCollector {
	role := prometheus.Labels{"role": a.o.Role.String()}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, role) }
	return &metricsCollector{a: a,
		pairs:            desc("dxpu_agent_pairs", "Pairs programmed on this agent, a bridge each."),
		pairsUp:          desc("dxpu_agent_pairs_up", "Pairs programmed on this agent whose link is up."),
		pairsSteered:     desc("dxpu_agent_pairs_steered", "Pairs programmed on this agent whose frames the kernel steers to a socket of their own."),
		droppedUnknown:   desc("dxpu_agent_dropped_unknown_pair_total", "Frames on the data-plane socket for a pair not programmed here."),
		droppedMalformed: desc("dxpu_agent_dropped_malformed_total", "Frames on the data-plane socket too short or of another version to carry a pair ID."),
		droppedOverflow:  desc("dxpu_agent_dropped_overflow_total", "Frames on the data-plane socket dropped because their pair's queue was full."),
	}
}

// Describe implements prometheus.Collector: nothing, an unchecked
// collector.
func (c *metricsCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector. It reads the pairs published
// (publishPairs), never a.mu: a scrape does not wait behind a hot-plug.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	var prs []*pairRun
	if p := c.a.live.Load(); p != nil {
		prs = *p
	}
	up := 0
	for _, pr := range prs {
		if pr.runner.State() == bridge.StateUp {
			up++
		}
		pr.metrics.Collect(ch)
	}
	ch <- prometheus.MustNewConstMetric(c.pairs, prometheus.GaugeValue, float64(len(prs)))
	ch <- prometheus.MustNewConstMetric(c.pairsUp, prometheus.GaugeValue, float64(up))
	m := c.a.mux
	ch <- prometheus.MustNewConstMetric(c.pairsSteered, prometheus.GaugeValue, float64(m.SteeredPairs()))
	ch <- prometheus.MustNewConstMetric(c.droppedUnknown, prometheus.CounterValue, float64(m.Unknown.Load()))
	ch <- prometheus.MustNewConstMetric(c.droppedMalformed, prometheus.CounterValue, float64(m.Malformed.Load()))
	ch <- prometheus.MustNewConstMetric(c.droppedOverflow, prometheus.CounterValue, float64(m.Overflow.Load()))
}

// pairCollector is the collector of a pair's bridge: the one `dxpu bridge`
// serves, labelled with the pair and the agent's role.
func (a *Agent) pairCollector(id uint32, r *driver.Runner) *driver.Collector {
	return driver.NewCollector(r, prometheus.Labels{"pair": strconv.FormatUint(uint64(id), 10), "role": a.o.Role.String()})
}

// publishPairs publishes the pairs programmed now, by ID, for the
// metrics; called with a.mu held after every change to a.pairs.
func (a *Agent) publishPairs() {
	prs := make([]*pairRun, 0, len(a.pairs))
	for _, pr := range a.pairs {
		prs = append(prs, pr)
	}
	slices.SortFunc(prs, func(x, y *pairRun) int { return cmp.Compare(x.p.ID, y.p.ID) })
	a.live.Store(&prs)
}

// MetricsAddr is where the agent's /metrics is served (nil without
// Options.Metrics, or before Run bound it).
func (a *Agent) MetricsAddr() net.Addr {
	if p := a.metricsAddr.Load(); p != nil {
		return *p
	}
	return nil
}
