package switching

import (
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a CounterSource to Prometheus:
//
//	dxpu_switch_pair_packets_total{pair,reason}  dxpu_switch_pair_bytes_total{pair,reason}
//	dxpu_switch_port_packets_total{port,reason}  dxpu_switch_port_bytes_total{port,reason}
//	dxpu_switch_table_version
//
// pair is the pair ID in decimal; port "" collects unmanaged interfaces.
// Only non-zero series are exported.
type Collector struct {
	src     CounterSource
	version func() uint64

	pairPkts, pairBytes, portPkts, portBytes, tableVersion *prometheus.Desc
}

// NewCollector returns a collector over src; version reports the table
// version in force.
func NewCollector(src CounterSource, version func() uint64) *Collector {
	return &Collector{
		src: src, version: version,
		pairPkts:     prometheus.NewDesc("dxpu_switch_pair_packets_total", "Frames of a pair by what the switch did with them.", []string{"pair", "reason"}, nil),
		pairBytes:    prometheus.NewDesc("dxpu_switch_pair_bytes_total", "Bytes of a pair by what the switch did with them.", []string{"pair", "reason"}, nil),
		portPkts:     prometheus.NewDesc("dxpu_switch_port_packets_total", "Frames received (or, tx_*, transmitted) on a port by reason.", []string{"port", "reason"}, nil),
		portBytes:    prometheus.NewDesc("dxpu_switch_port_bytes_total", "Bytes received (or, tx_*, transmitted) on a port by reason.", []string{"port", "reason"}, nil),
		tableVersion: prometheus.NewDesc("dxpu_switch_table_version", "Version of the forwarding table in force.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pairPkts, c.pairBytes, c.portPkts, c.portBytes, c.tableVersion} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(pkts, bytes *prometheus.Desc, label string, ctr Counters) {
		for r := Reason(0); r < NumReasons; r++ {
			if ctr.Packets[r] == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(pkts, prometheus.CounterValue, float64(ctr.Packets[r]), label, r.String())
			ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(ctr.Bytes[r]), label, r.String())
		}
	}
	if err := c.src.PairCounters(func(id uint32, ctr Counters) {
		emit(c.pairPkts, c.pairBytes, strconv.FormatUint(uint64(id), 10), ctr)
	}); err != nil {
		slog.Warn("switch: reading pair counters", "err", err)
	}
	if err := c.src.PortCounters(func(port string, ctr Counters) {
		emit(c.portPkts, c.portBytes, port, ctr)
	}); err != nil {
		slog.Warn("switch: reading port counters", "err", err)
	}
	if c.version != nil {
		ch <- prometheus.MustNewConstMetric(c.tableVersion, prometheus.GaugeValue, float64(c.version()))
	}
}
