package driver_test

import (
	"net"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/frametest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Datagrams from sources other than the peer, which the UDP socket drops
// before the bridge sees them, are exported
// (dxpu_bridge_dropped_foreign_source_total), as are the peer's frames
// refused for their header, each under its own reason; none of them is
// counted as another reason.
func TestCollectorExportsDropReasons(t *testing.T) {
	t.Parallel()
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	peer, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(lo))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := udp.Listen(lo, peer.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	const pair = 7
	r := frametest.HostRunner(t, pair, conn)

	// Strangers on other ports: junk, and HELLOs naming the pair.
	hello := frametest.Hello(pair)
	const strangers, each = 4, 5
	for range strangers {
		s, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(lo))
		if err != nil {
			t.Fatal(err)
		}
		for j := range each {
			d := []byte("not a dxpu frame")
			if j%2 == 0 {
				d = hello
			}
			if _, err := s.WriteToUDPAddrPort(d, conn.LocalAddr()); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	// The peer: a short header, a version 2 header, another pair's frame.
	other := append([]byte(nil), hello...)
	encap.Header(other).SetPairID(pair + 1)
	v2 := append([]byte(nil), hello...)
	v2[0] = 2<<4 | v2[0]&0xf
	for _, f := range [][]byte{hello[:12], v2, other} {
		if _, err := peer.WriteToUDPAddrPort(f, conn.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	// Wait on the socket's own count: the test is of what is exported.
	waitfor.Until(t, "the datagrams dropped", func() bool {
		return conn.ForeignDropped() == strangers*each && r.Counters().FramesDropped == 3
	})

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(driver.NewCollector(r, prometheus.Labels{"pair": "7"})); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"dxpu_bridge_dropped_foreign_source_total": strangers * each,
		"dxpu_bridge_dropped_malformed_total":      1,
		"dxpu_bridge_dropped_version_total":        1,
		"dxpu_bridge_dropped_unknown_pair_total":   1,
		"dxpu_bridge_frames_dropped_total":         3, // the foreign datagrams never reached the bridge
		"dxpu_bridge_frames_received_total":        0, // no stranger's HELLO was taken
		"dxpu_bridge_dropped_seal_malformed_total": 0,
		"dxpu_bridge_dropped_unsealed_total":       0,
		"dxpu_bridge_dropped_forged_total":         0,
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[f.GetName()] += m.GetCounter().GetValue()
		}
	}
	for name, n := range want {
		if v, ok := got[name]; !ok || v != float64(n) {
			t.Errorf("%s = %v (exported: %t), want %d", name, v, ok, n)
		}
	}
	// And in the text a scrape of /metrics reads.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if line := `dxpu_bridge_dropped_foreign_source_total{pair="7"} ` + strconv.Itoa(strangers*each); !strings.Contains(rec.Body.String(), line+"\n") {
		t.Errorf("/metrics has no line %q:\n%s", line, rec.Body.String())
	}
}
