package scalebench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/app/labnet"
	"github.com/dxpu/dxpu/tlp/encap"
)

// endpoints are where one pair's processes listen and send.
type endpoints struct {
	hostListen, hostPeer netip.AddrPort // the host side's bridge socket
	gpuListen, gpuPeer   netip.AddrPort // the GPU side's
	// adapter is the host side's NetTLP address (its tag ports), load
	// this process's, where the reads come from.
	adapter, load netip.Addr
	// hostMetrics and gpuMetrics serve the processes' Prometheus metrics.
	hostMetrics, gpuMetrics netip.AddrPort
}

// fabric is where a scenario's pairs live.
type fabric interface {
	name() string
	// pair returns pair i's addresses; host and box number the pair's
	// host and box in the scenario.
	pair(i, host, box int) (endpoints, error)
	// start starts a host-side (gpu false) or GPU-side process.
	start(c *exec.Cmd, gpu bool) error
	// inHost runs fn where the host sides live (for this process's
	// sockets).
	inHost(fn func() error) error
	// raw opens two plain sockets on a pair's path, and the front each
	// datagram needs there to cross it.
	raw() (tx, rx *udp.Conn, prefix []byte, err error)
	// metrics fetches a process's /metrics at addr, from where it lives.
	metrics(ctx context.Context, gpu bool, addr netip.AddrPort) (map[string]float64, error)
	// drops returns the frames the switch dropped (ok false: no switch).
	drops(ctx context.Context) (n uint64, ok bool, err error)
	close()
}

// loopback puts every host, box and adapter on its own 127.x address: a
// block chosen from this process's ID, so that two runs rarely meet.
type loopback struct{ a, b byte }

func newLoopback() *loopback {
	pid := os.Getpid()
	return &loopback{a: byte(20 + pid/256%100), b: byte(pid % 256)}
}

func (*loopback) name() string { return "loopback" }
func (*loopback) close()       {}

// Adapters at 127.a.b.(2i+1) and this process at 127.a.b.(2i+2); hosts at
// 127.(a+100).b.(1+h), boxes at 127.(a+100).b.(128+b).
func (l *loopback) pair(i, host, box int) (endpoints, error) {
	if i >= maxLoopbackPairs || host >= maxLoopbackPairs || box >= maxLoopbackPairs {
		return endpoints{}, fmt.Errorf("scalebench: loopback holds at most %d pairs, hosts and boxes", maxLoopbackPairs)
	}
	h := netip.AddrFrom4([4]byte{127, l.a + 100, l.b, byte(1 + host)})
	g := netip.AddrFrom4([4]byte{127, l.a + 100, l.b, byte(128 + box)})
	// Fixed ports in this run's own address block: ports picked free one
	// by one could be picked twice before the processes bind them.
	e := endpoints{hostListen: netip.AddrPortFrom(h, uint16(loPortBase+i)), gpuListen: netip.AddrPortFrom(g, uint16(loPortBase+i)),
		hostMetrics: netip.AddrPortFrom(h, uint16(loMetricsBase+i)), gpuMetrics: netip.AddrPortFrom(g, uint16(loMetricsBase+i)),
		adapter: netip.AddrFrom4([4]byte{127, l.a, l.b, byte(2*i + 1)}), load: netip.AddrFrom4([4]byte{127, l.a, l.b, byte(2*i + 2)})}
	e.hostPeer, e.gpuPeer = e.gpuListen, e.hostListen
	return e, nil
}

// maxLoopbackPairs is what the address plan holds.
const maxLoopbackPairs = 120

// Pair i's bridges listen on UDP port loPortBase+i and serve metrics on
// TCP port loMetricsBase+i of their host's or box's address.
const (
	loPortBase    = 20000
	loMetricsBase = 21000
)

func (*loopback) metrics(ctx context.Context, _ bool, addr netip.AddrPort) (map[string]float64, error) {
	return scrape(ctx, nil, addr)
}

// scrape fetches http://addr/metrics, dialing with dial when set.
func scrape(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr netip.AddrPort) (map[string]float64, error) {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: dial}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("scalebench: bridge metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scalebench: bridge metrics at %v: %s", addr, resp.Status)
	}
	return labnet.ParseSamples(resp.Body)
}

func (*loopback) start(c *exec.Cmd, _ bool) error { return childproc.Start(c, nil) }
func (*loopback) inHost(fn func() error) error    { return fn() }

func (*loopback) drops(context.Context) (uint64, bool, error) { return 0, false, nil }

func (*loopback) raw() (*udp.Conn, *udp.Conn, []byte, error) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	tx, err := udp.Listen(lo, netip.AddrPort{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("scalebench: raw UDP: %w", err)
	}
	rx, err := udp.Listen(lo, tx.LocalAddr())
	if err != nil {
		tx.Close()
		return nil, nil, nil, fmt.Errorf("scalebench: raw UDP: %w", err)
	}
	tx.SetPeer(rx.LocalAddr())
	return tx, rx, nil, nil
}

// namespaces is labnet's fabric: the host sides and this process in netns
// host, the GPU sides in netns gpu, the XDP switch between, pair i+1 at
// UDP port nsPortBase+i at both ends. The adapters use netns host's
// loopback.
type namespaces struct {
	*labnet.Net
}

const (
	nsPortBase    = 5000
	nsMetricsBase = 6000
)

// ErrNamespaces is returned when namespace mode cannot run.
var ErrNamespaces = labnet.ErrNamespaces

func newNamespaces(ctx context.Context, pairs int, log *slog.Logger) (*namespaces, error) {
	if err := labnet.RequireRoot(os.Geteuid()); err != nil {
		return nil, fmt.Errorf("scalebench: %w: run with --loopback instead", err)
	}
	ps := make([]labnet.Pair, pairs)
	for i := range ps {
		ps[i] = labnet.Pair{ID: uint32(i + 1), UDPPort: uint16(nsPortBase + i)}
	}
	n, err := labnet.Start(ctx, labnet.Options{Pairs: ps, Log: log})
	if err != nil {
		return nil, fmt.Errorf("scalebench: %w", err)
	}
	return &namespaces{n}, nil
}

func (*namespaces) name() string { return "netns" }
func (n *namespaces) close()     { n.Close() }

func (n *namespaces) pair(i, _, _ int) (endpoints, error) {
	if i >= maxLoopbackPairs {
		return endpoints{}, fmt.Errorf("scalebench: at most %d pairs", maxLoopbackPairs)
	}
	port := uint16(nsPortBase + i)
	e := endpoints{hostListen: n.HostAddr(port), hostPeer: n.HostSwitch(), gpuListen: n.GPUAddr(port), gpuPeer: n.GPUSwitch(),
		adapter: netip.AddrFrom4([4]byte{127, 0, 1, byte(2*i + 1)}), load: netip.AddrFrom4([4]byte{127, 0, 1, byte(2*i + 2)})}
	// Each namespace is this run's own: fixed metrics ports on its
	// loopback.
	lo := netip.MustParseAddr("127.0.0.1")
	e.hostMetrics, e.gpuMetrics = netip.AddrPortFrom(lo, uint16(nsMetricsBase+i)), netip.AddrPortFrom(lo, uint16(nsMetricsBase+i))
	return e, nil
}

// metrics dials from inside the process's namespace.
func (n *namespaces) metrics(ctx context.Context, gpu bool, addr netip.AddrPort) (map[string]float64, error) {
	ns := n.Host
	if gpu {
		ns = n.GPU
	}
	return scrape(ctx, func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}, addr)
}

// start forks the process from a thread inside the namespace: the child
// inherits it.
func (n *namespaces) start(c *exec.Cmd, gpu bool) error {
	if gpu {
		return childproc.Start(c, n.GPU.Enter)
	}
	return childproc.Start(c, n.Host.Enter)
}

func (n *namespaces) inHost(fn func() error) error { return n.Host.Do(fn) }

// raw opens plain sockets at pair 1's endpoints; each datagram starts with
// a dxpu header of pair 1 so that the switch forwards it by that rule.
func (n *namespaces) raw() (*udp.Conn, *udp.Conn, []byte, error) {
	var tx, rx *udp.Conn
	if err := n.GPU.Do(func() (err error) { rx, err = udp.Listen(n.GPUAddr(nsPortBase), n.GPUSwitch()); return err }); err != nil {
		return nil, nil, nil, fmt.Errorf("scalebench: raw UDP: %w", err)
	}
	if err := n.Host.Do(func() (err error) { tx, err = udp.Listen(n.HostAddr(nsPortBase), n.HostSwitch()); return err }); err != nil {
		rx.Close()
		return nil, nil, nil, fmt.Errorf("scalebench: raw UDP: %w", err)
	}
	h := make(encap.Header, encap.HeaderLen)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgAck)
	h.SetPairID(1)
	return tx, rx, h, nil
}

// drops sums the frames the switch dropped over every pair: those it
// counted as dropped (spoofed, fault, malformed, no_room) and, where it
// counts transmissions, those it forwarded but did not transmit.
func (n *namespaces) drops(ctx context.Context) (uint64, bool, error) {
	m, err := n.Metrics(ctx)
	if err != nil {
		return 0, true, fmt.Errorf("scalebench: %w", err)
	}
	return switchDrops(m), true, nil
}

// switchDrops reads the drops out of the switch's samples.
func switchDrops(m map[string]float64) uint64 {
	by := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "dxpu_switch_pair_packets_total{") {
			continue
		}
		_, r, ok := strings.Cut(k, `reason="`)
		if !ok {
			continue
		}
		r, _, _ = strings.Cut(r, `"`)
		by[r] += v
	}
	d := by["spoofed"] + by["fault"] + by["malformed"] + by["no_room"]
	if by["tx_to_gpu"] > 0 || by["tx_to_host"] > 0 {
		d += max(0, by["to_gpu"]-by["tx_to_gpu"]) + max(0, by["to_host"]-by["tx_to_host"])
	}
	return uint64(d)
}
