package labnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Metrics fetches the switch's /metrics from inside netns sw (it listens
// on that namespace's loopback) and returns the samples by series,
// `name{labels}` as the text format writes them.
func (n *Net) Metrics(ctx context.Context) (map[string]float64, error) {
	if n.sw == nil || n.metrics == "" {
		return nil, errors.New("switch metrics: the switch is not running")
	}
	sw := n.sw
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := sw.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.metrics+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("switch metrics: %w", err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("switch metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("switch metrics: %s", resp.Status)
	}
	return ParseSamples(resp.Body)
}

// ParseSamples reads a Prometheus text exposition and returns its samples
// by series, `name{labels}` as the text format writes them.
func ParseSamples(r io.Reader) (map[string]float64, error) {
	samples := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
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
	return samples, nil
}

// Flow is what the switch forwarded one way.
type Flow struct{ Frames, Bytes uint64 }

// PairFlows is what it forwarded of one pair, both ways.
type PairFlows struct{ ToGPU, ToHost Flow }

// PairCounters returns the forwarded frames and bytes of the table's
// pairs, by pair ID (from dxpu_switch_pair_{packets,bytes}_total with
// reason to_gpu and to_host).
func (n *Net) PairCounters(ctx context.Context) (map[uint32]PairFlows, error) {
	m, err := n.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[uint32]PairFlows{}
	for _, p := range n.pairs {
		get := func(what, reason string) uint64 {
			return uint64(m[fmt.Sprintf(`dxpu_switch_pair_%s_total{pair="%d",reason="%s"}`, what, p.ID, reason)])
		}
		out[p.ID] = PairFlows{
			ToGPU:  Flow{get("packets", "to_gpu"), get("bytes", "to_gpu")},
			ToHost: Flow{get("packets", "to_host"), get("bytes", "to_host")},
		}
	}
	return out, nil
}
