package bridgeagent_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
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
	samples := map[string]float64{}
	sc := bufio.NewScanner(conn)
	body := false
	for sc.Scan() {
		line := sc.Text()
		if !body {
			if line == "" {
				body = true
			} else if strings.HasPrefix(line, "HTTP/") && !strings.Contains(line, " 200 ") {
				return nil, fmt.Errorf("switch metrics: %s", line)
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("switch metrics: malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("switch metrics: sample %q: %w", line, err)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("switch metrics: %w", err)
	}
	if !body {
		return nil, fmt.Errorf("switch metrics: no body")
	}
	return samples, nil
}

// pairForwarded returns how many frames of pair the switch forwarded in
// each direction.
func pairForwarded(samples map[string]float64, pair uint32) (toGPU, toHost float64) {
	series := func(reason string) string {
		return fmt.Sprintf(`dxpu_switch_pair_packets_total{pair="%d",reason="%s"}`, pair, reason)
	}
	return samples[series("to_gpu")], samples[series("to_host")]
}
