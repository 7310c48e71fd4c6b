package httpguard

import (
	"errors"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServeMetrics serves g on ln as GET /metrics, bounded by cfg over
// MetricsDefaults, until the returned server is closed: the one metrics
// server of the bridge, the bridge agent and the switch. A failure other
// than closing is logged.
func ServeMetrics(name string, ln net.Listener, g prometheus.Gatherer, cfg Config, logger *slog.Logger) *Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := New(name, mux, cfg, MetricsDefaults, logger)
	go func() {
		if err := srv.Serve(ln, nil); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(name+" server", "err", err)
		}
	}()
	return srv
}
