package bridgeagent_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/dxpu/dxpu/internal/app/labnet"
)

// switchMetricsAddr is where the switch serves /metrics, inside netns sw.
const switchMetricsAddr = "127.0.0.1:9855"

// switchCounters fetches the switch's /metrics from inside netns sw and
// returns its samples by series ("name{labels}").
func (d *deployment) switchCounters() (map[string]float64, error) {
	var conn net.Conn
	err := d.ns["sw"].Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", switchMetricsAddr, 10*time.Second)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("switch metrics: %w", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.0\r\nHost: sw\r\n\r\n"); err != nil {
		return nil, fmt.Errorf("switch metrics: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, fmt.Errorf("switch metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("switch metrics: %s", resp.Status)
	}
	return labnet.ParseSamples(resp.Body)
}

// pairForwarded returns how many frames of pair the switch forwarded in
// each direction.
func pairForwarded(samples map[string]float64, pair uint32) (toGPU, toHost float64) {
	series := func(reason string) string {
		return fmt.Sprintf(`dxpu_switch_pair_packets_total{pair="%d",reason="%s"}`, pair, reason)
	}
	return samples[series("to_gpu")], samples[series("to_host")]
}
