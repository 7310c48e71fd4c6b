package bridged

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/ratelog"
	"github.com/dxpu/dxpu/bridge/seal"
)

// keyGenCheckEvery is how often a keyed bridge looks for frames its peer
// sealed under a generation it does not hold; keyGenLogEvery how often the
// mismatch may reach the log (a peer retrying its HELLO makes hundreds of
// such frames a second).
const (
	keyGenCheckEvery = 250 * time.Millisecond
	keyGenLogEvery   = 10 * time.Second
)

// KeyGenerationWatch reports a peer that seals under a pair key generation
// this side does not hold (the two sides were given different --key-
// generation numbers, or different keys): the seal drops every such frame
// as dropped_unknown_key and the link never comes up, which says nothing
// by itself. Check logs it, through the limiter, with both numbers.
type KeyGenerationWatch struct {
	lim  *ratelog.Limiter
	seen uint64 // DroppedUnknownGeneration already reported
}

// NewKeyGenerationWatch returns a watch logging to log, one line per 10 s
// at most (the frames in between are counted in the next); now is the
// limiter's clock (nil: the wall clock).
func NewKeyGenerationWatch(log *slog.Logger, now func() time.Time) *KeyGenerationWatch {
	return &KeyGenerationWatch{lim: ratelog.New(log, keyGenLogEvery, now)}
}

// Mismatch returns the line that describes the mismatch c and s show
// (this side's counters and key state), or "" when there is none.
func Mismatch(c bridge.Counters, s seal.State) string {
	if c.DroppedUnknownGeneration == 0 {
		return ""
	}
	msg := fmt.Sprintf("key generation mismatch: peer seals with generation %d, this end has %d", c.LastUnknownGeneration, s.ActiveGeneration)
	if s.ActiveGeneration > 0xff {
		msg += " (the wire carries the low 8 bits of the peer's)"
	}
	return msg
}

// Check logs the frames refused for their generation since the last call.
func (w *KeyGenerationWatch) Check(c bridge.Counters, s seal.State) {
	n := c.DroppedUnknownGeneration
	if n <= w.seen {
		return
	}
	w.lim.Log(slog.LevelWarn, "key-generation-mismatch", int(n-w.seen), Mismatch(c, s),
		"peer_generation", c.LastUnknownGeneration, "generation", s.ActiveGeneration, "frames_dropped", n)
	w.seen = n
}

// Run checks r every keyGenCheckEvery until ctx ends; it returns at once
// for an unkeyed bridge.
func (w *KeyGenerationWatch) Run(ctx context.Context, r *driver.Runner) {
	if _, keyed := r.KeyState(); !keyed {
		return
	}
	done := make(chan struct{})
	go func() { w.lim.Run(ctx); close(done) }()
	defer func() { <-done }()
	t := time.NewTicker(keyGenCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s, _ := r.KeyState()
			w.Check(r.Counters(), s)
		}
	}
}
