package driver

import (
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
)

// Collector exports a runner's bridge.Counters to Prometheus: one metric
// per field, named dxpu_bridge_<field in snake case>, totals as counters
// (CreditStalls with a class label), TagsInUse and the RTT figures as
// gauges (seconds). constLabels (pair, role, ...) are added to every one.
// Received frames dropped, by reason (each also in
// dxpu_bridge_frames_dropped_total but the first):
//
//	dxpu_bridge_dropped_foreign_source_total   datagrams (UDP) or frames (AF_PACKET, AF_XDP: another source MAC) from an address other than the peer's (the transport's count; never reach the bridge)
//	dxpu_bridge_dropped_malformed_total        shorter than the 40-byte dxpu header
//	dxpu_bridge_dropped_version_total          dxpu version not 1
//	dxpu_bridge_dropped_unknown_pair_total     another pair's ID in the header
//	dxpu_bridge_dropped_unsealed_total         keyed pair: not sealed
//	dxpu_bridge_dropped_forged_total           keyed pair: tag did not verify
//	dxpu_bridge_dropped_replayed_total         keyed pair: replayed or too old
//	dxpu_bridge_dropped_unknown_key_total      keyed pair: no key for the epoch and generation
//	dxpu_bridge_dropped_no_session_total       keyed pair: session frame without session keys
//	dxpu_bridge_dropped_seal_malformed_total   keyed pair: seal layer malformed (sealed body short, body length, mode, reserved bits)
//	dxpu_bridge_dropped_handshake_type_total   keyed pair: other message under the handshake key
type Collector struct {
	r      *Runner
	descs  []*prometheus.Desc
	fields []int
	// The runner's timer lateness (Lateness), beside the counters.
	lateTotal, lateMax, caughtUp *prometheus.Desc
}

var camel = regexp.MustCompile(`([a-z0-9])([A-Z])`)

func snake(s string) string {
	s = strings.ReplaceAll(s, "TLPs", "Tlps")
	s = strings.ReplaceAll(s, "RTOs", "Rtos")
	s = strings.ReplaceAll(s, "SRTT", "Srtt")
	s = strings.ReplaceAll(s, "RTO", "Rto")
	s = strings.ReplaceAll(s, "UR", "Ur")
	s = strings.ReplaceAll(s, "CA", "Ca")
	return strings.ToLower(camel.ReplaceAllString(s, "${1}_${2}"))
}

// gauge reports whether counter field name is a current value rather than
// a total: exported without _total, as a gauge.
func gauge(name string) bool { return name == "TagsInUse" || name == "LastUnknownGeneration" }

// NewCollector returns a collector for r.
func NewCollector(r *Runner, constLabels prometheus.Labels) *Collector {
	c := &Collector{r: r}
	t := reflect.TypeOf(bridge.Counters{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := "dxpu_bridge_" + snake(f.Name)
		var labels []string
		switch {
		case f.Type == reflect.TypeOf(time.Duration(0)):
			name += "_seconds"
		case f.Type.Kind() == reflect.Array:
			labels = []string{"class"}
			name += "_total"
		case gauge(f.Name):
		default:
			name += "_total"
		}
		c.descs = append(c.descs, prometheus.NewDesc(name, "bridge counter "+f.Name, labels, constLabels))
		c.fields = append(c.fields, i)
	}
	c.lateTotal = prometheus.NewDesc("dxpu_bridge_timer_late_total",
		"times the runner's timer fired LateAfter (10ms) or more past its deadline: the process was not running, frames due then left late", nil, constLabels)
	c.lateMax = prometheus.NewDesc("dxpu_bridge_timer_late_max_seconds",
		"the most the runner's timer fired past its deadline", nil, constLabels)
	c.caughtUp = prometheus.NewDesc("dxpu_bridge_caught_up_frames_total",
		"frames taken from the socket after a stall, ahead of the deadline the process stalled past (a completion that came meanwhile completes its read)", nil, constLabels)
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.lateTotal
	ch <- c.lateMax
	ch <- c.caughtUp
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	l := c.r.Lateness()
	ch <- prometheus.MustNewConstMetric(c.lateTotal, prometheus.CounterValue, float64(l.Count))
	ch <- prometheus.MustNewConstMetric(c.lateMax, prometheus.GaugeValue, l.Max.Seconds())
	ch <- prometheus.MustNewConstMetric(c.caughtUp, prometheus.CounterValue, float64(c.r.CaughtUp()))
	v := reflect.ValueOf(c.r.Counters())
	t := v.Type()
	for k, i := range c.fields {
		f := v.Field(i)
		d := c.descs[k]
		switch {
		case t.Field(i).Type == reflect.TypeOf(time.Duration(0)):
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, time.Duration(f.Int()).Seconds())
		case f.Kind() == reflect.Array:
			for j := 0; j < f.Len(); j++ {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(f.Index(j).Uint()), []string{"P", "NP", "Cpl"}[j])
			}
		case gauge(t.Field(i).Name):
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(f.Uint()))
		default:
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(f.Uint()))
		}
	}
}
