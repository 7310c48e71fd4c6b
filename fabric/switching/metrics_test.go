package switching_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

func TestCollectorExportsCounters(t *testing.T) {
	f, _ := newForwarder(t)
	for _, c := range switchtest.Corpus() {
		buf := append(make([]byte, switching.Headroom), c.Frame...)
		f.Forward(buf, switching.Headroom, testIndex[c.Port])
	}
	var spoofed uint64
	f.PairCounters(func(id uint32, c switching.Counters) {
		if id == switchtest.PairPlain {
			spoofed = c.Packets[switching.ReasonSpoofed]
		}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(switching.NewCollector(f, func() uint64 { return 7 }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found, version := false, 0.0
	for _, mf := range mfs {
		if mf.GetName() == "dxpu_switch_table_version" {
			version = mf.Metric[0].Gauge.GetValue()
		}
		if mf.GetName() != "dxpu_switch_pair_packets_total" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pair"] == "1" && labels["reason"] == "spoofed" {
				found = uint64(m.Counter.GetValue()) == spoofed && spoofed > 0
			}
		}
	}
	if version != 7 {
		t.Errorf("table version gauge %v, want 7", version)
	}
	if !found {
		t.Fatalf("no dxpu_switch_pair_packets_total{pair=\"1\",reason=\"spoofed\"} = %d", spoofed)
	}
}

// TestCollectorExportsBytes: the byte series carry bytes.
func TestCollectorExportsBytes(t *testing.T) {
	f, _ := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	frame := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward(f, frame, switchtest.P1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(switching.NewCollector(f, nil))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == "to_gpu" && (labels["pair"] == "1" || labels["port"] == switchtest.P1) {
				found[mf.GetName()] = m.Counter.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{"dxpu_switch_pair_packets_total": 1, "dxpu_switch_pair_bytes_total": float64(len(frame)),
		"dxpu_switch_port_packets_total": 1, "dxpu_switch_port_bytes_total": float64(len(frame))} {
		if found[name] != want {
			t.Errorf("%s{to_gpu} = %v, want %v", name, found[name], want)
		}
	}
}
