package switchd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dxpu/dxpu/bridge/ratelog"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
)

// dataPath is what a mode provides: apply a table, export counters, move
// frames until ctx ends.
type dataPath interface {
	apply(t *table.Table) (skipped []error, err error)
	switching.CounterSource
	run(ctx context.Context) error
	close() error
}

// install compiles t for ports and puts the rules in force on fwd. On
// error the rules in force stay.
func install(fwd *switching.Forwarder, t *table.Table, ports map[string]switching.Port) (skipped []error, err error) {
	rules, skipped, err := switching.Compile(t, ports, fwd.UDPPort())
	if err != nil {
		return nil, fmt.Errorf("switch: table version %d: %w", t.Version, err)
	}
	fwd.Update(rules)
	return skipped, nil
}

// slowPathLogger logs frames the fast path handed to Go, one line per
// port and second at most (the rest are counted): a peer that floods
// control frames must not flood the log.
func slowPathLogger(log *slog.Logger) func(port string, frame []byte) {
	limit := ratelog.New(log, time.Second, nil)
	return func(port string, frame []byte) {
		if !log.Enabled(context.Background(), slog.LevelDebug) {
			return
		}
		limit.Log(slog.LevelDebug, "slow-path "+port, len(frame), "switch: slow path", "port", port, "bytes", len(frame))
	}
}

// fwdDataPath is the Go forwarder behind a socket driver.
type fwdDataPath struct {
	*switching.Forwarder
	ports   map[string]switching.Port
	runFn   func(ctx context.Context) error
	closeFn func() error
}

func (d *fwdDataPath) apply(t *table.Table) ([]error, error) { return install(d.Forwarder, t, d.ports) }
func (d *fwdDataPath) run(ctx context.Context) error         { return d.runFn(ctx) }
func (d *fwdDataPath) close() error                          { return d.closeFn() }
