package manager

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/fabric/pool"
)

type metrics struct {
	allocLatency    prometheus.Histogram
	allocations     *prometheus.CounterVec
	sagaFailures    *prometheus.CounterVec
	releases        prometheus.Counter
	gpuFailures     prometheus.Counter
	reconciles      prometheus.Counter
	reconcileErrors prometheus.Counter
	loadErrors      prometheus.Counter
	leader          prometheus.Gauge
	unauthorized    prometheus.Counter
	watches         prometheus.Gauge
	watchesRefused  prometheus.Counter
	conns           *prometheus.GaugeVec
	connsEvicted    prometheus.Counter
	connsRefused    prometheus.Counter
	requestsLimited *prometheus.CounterVec
	degradations    prometheus.Counter
}

// poolCollector reports the pool's GPU counts at scrape time.
type poolCollector struct {
	m        *Manager
	gpus     *prometheus.Desc
	cnt      *prometheus.Desc
	degraded *prometheus.Desc
	unreach  *prometheus.Desc
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.gpus
	ch <- c.cnt
	ch <- c.degraded
	ch <- c.unreach
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.m.Pool()
	if p == nil {
		return
	}
	s := p.Stats()
	for state, v := range map[string]int{"total": s.GPUs, "free": s.Free, "used": s.Used, "unhealthy": s.Unhealthy, "draining": s.Draining} {
		ch <- prometheus.MustNewConstMetric(c.gpus, prometheus.GaugeValue, float64(v), state)
	}
	for kind, v := range map[string]int{"boxes": s.Boxes, "hosts": s.Hosts, "allocations": s.Allocs} {
		ch <- prometheus.MustNewConstMetric(c.cnt, prometheus.GaugeValue, float64(v), kind)
	}
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, float64(c.m.degradedAllocations(p)))
	ch <- prometheus.MustNewConstMetric(c.unreach, prometheus.GaugeValue, float64(c.m.unreachableBoxes()))
}

func newMetrics(reg *prometheus.Registry, m *Manager) (*metrics, error) {
	mt := &metrics{
		allocLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dxpu_allocation_duration_seconds", Help: "Time to allocate GPUs, saga included.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 14),
		}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dxpu_allocations_total", Help: "Allocation requests by result (ok, or the error code).",
		}, []string{"result"}),
		sagaFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dxpu_saga_failures_total", Help: "Allocation sagas rolled back, by the step that failed.",
		}, []string{"step"}),
		releases:        prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_releases_total", Help: "Allocations released."}),
		gpuFailures:     prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_gpu_failures_total", Help: "GPUs marked unhealthy."}),
		reconciles:      prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_reconcile_runs_total", Help: "Reconciliation passes."}),
		reconcileErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_reconcile_errors_total", Help: "Allocations reconciliation could not re-apply."}),
		loadErrors:      prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_store_load_errors_total", Help: "Stored records skipped at load."}),
		leader:          prometheus.NewGauge(prometheus.GaugeOpts{Name: "dxpu_manager_leader", Help: "1 while this manager leads."}),
		unauthorized:    prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_api_unauthorized_total", Help: "API calls refused for a missing or wrong token, or one whose role does not allow them."}),
		watches:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "dxpu_api_watches", Help: "Table and event watches in progress (served by NewServer)."}),
		watchesRefused:  prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_api_watches_refused_total", Help: "Watches refused because their client held the most allowed."}),
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dxpu_api_connections",
			Help: "API connections held, by class: anonymous (no credential shown yet) or credentialed."}, []string{"class"}),
		connsEvicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_api_connections_evicted_total",
			Help: "Idle anonymous connections closed to make room for a new one."}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_api_connections_refused_total",
			Help: "Connections answered 503 at once: no room, even after cutting idle anonymous ones."}),
		degradations: prometheus.NewCounter(prometheus.CounterOpts{Name: "dxpu_allocation_degradations_total",
			Help: "Times an allocation became degraded: a pair's link down past the bound."}),
		requestsLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dxpu_api_requests_limited_total",
			Help: "Requests refused by admission, by reason: rate (anonymous rate), in_flight (requests in progress), reserved (no credential on a reserved connection)."}, []string{"reason"}),
	}
	pc := &poolCollector{m: m,
		gpus: prometheus.NewDesc("dxpu_pool_gpus", "GPUs in the pool by state.", []string{"state"}, nil),
		cnt:  prometheus.NewDesc("dxpu_pool_objects", "Boxes, hosts and allocations in the pool.", []string{"kind"}, nil),
		degraded: prometheus.NewDesc("dxpu_allocations_degraded",
			"Allocations degraded now: a pair's link down past the bound, or its box's agent unreachable (GET /v1/allocations says which and why).", nil, nil),
		unreach: prometheus.NewDesc("dxpu_boxes_unreachable",
			"Boxes whose agent has not answered past the bound (GET /v1/boxes says since when and why); their GPUs stay lent.", nil, nil),
	}
	for _, c := range []prometheus.Collector{mt.allocLatency, mt.allocations, mt.sagaFailures, mt.releases, mt.gpuFailures,
		mt.reconciles, mt.reconcileErrors, mt.loadErrors, mt.leader, mt.unauthorized, mt.watches, mt.watchesRefused,
		mt.conns, mt.connsEvicted, mt.connsRefused, mt.requestsLimited, mt.degradations, pc} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			return nil, err
		}
	}
	return mt, nil
}

func (mt *metrics) observeAlloc(d time.Duration, err error) {
	if errors.Is(err, pool.ErrDuplicate) {
		mt.allocations.WithLabelValues("duplicate").Inc()
		return
	}
	if err != nil {
		mt.allocations.WithLabelValues(apiErrorOf(err).Code).Inc()
		return
	}
	mt.allocLatency.Observe(d.Seconds())
	mt.allocations.WithLabelValues("ok").Inc()
}
