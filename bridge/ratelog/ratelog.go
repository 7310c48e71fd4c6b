// Package ratelog keeps per-packet log lines from flooding a daemon's log:
// the first occurrence of a key in an interval is logged as it is, the
// following ones in the same interval are only counted, and the count
// comes out as one line ("posted-lost x1234 in the last 1s") once the
// interval is over, at the next occurrence or at the next Flush.
package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// Limiter rate-limits log lines by key. It is safe for concurrent use.
type Limiter struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*window
}

// window is one key's current interval: when it opened, how many
// occurrences were held back, and the sum of their amounts.
type window struct {
	start      time.Time
	level      slog.Level
	msg        string
	suppressed int
	amount     int
}

// New returns a Limiter writing to log that lets one line per key through
// per interval; now is the clock (nil: time.Now). A non-positive interval
// is one second.
func New(log *slog.Logger, interval time.Duration, now func() time.Time) *Limiter {
	if interval <= 0 {
		interval = time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{log: log, interval: interval, now: now, keys: make(map[string]*window)}
}

// Log logs msg with args at level unless key was already logged in the
// current interval; then it only counts the occurrence, adding amount (a
// number of TLPs, say) to the interval's total.
func (l *Limiter) Log(level slog.Level, key string, amount int, msg string, args ...any) {
	now := l.now()
	l.mu.Lock()
	w, ok := l.keys[key]
	if ok && now.Sub(w.start) < l.interval {
		w.suppressed++
		w.amount += amount
		l.mu.Unlock()
		return
	}
	var summary window
	if ok {
		summary = *w
	}
	l.keys[key] = &window{start: now, level: level, msg: msg}
	l.mu.Unlock()
	if summary.suppressed > 0 {
		l.summarise(key, summary, now)
	}
	l.log.Log(context.Background(), level, msg, args...)
}

// Flush writes the count of every key whose interval is over and that held
// lines back (all of them with all set, as at shutdown). A daemon calls it
// every interval so that counts come out when the lines stop.
func (l *Limiter) Flush(all bool) {
	now := l.now()
	type pending struct {
		key string
		w   window
	}
	var out []pending
	l.mu.Lock()
	for k, w := range l.keys {
		if !all && now.Sub(w.start) < l.interval {
			continue
		}
		if w.suppressed > 0 {
			out = append(out, pending{k, *w})
		}
		delete(l.keys, k)
	}
	l.mu.Unlock()
	for _, p := range out {
		l.summarise(p.key, p.w, now)
	}
}

// Run flushes every interval until ctx ends, then flushes everything.
func (l *Limiter) Run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.Flush(true)
			return
		case <-t.C:
			l.Flush(false)
		}
	}
}

func (l *Limiter) summarise(key string, w window, now time.Time) {
	span := now.Sub(w.start).Round(time.Millisecond)
	l.log.Log(context.Background(), w.level, fmt.Sprintf("%s x%d in the last %s", key, w.suppressed, sim.FormatDuration(span)),
		"key", key, "suppressed", w.suppressed, "amount", w.amount, "interval", sim.FormatDuration(span), "first", w.msg)
}
