package bridged

import (
	"log/slog"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/ratelog"
)

// eventLogInterval is how often a per-TLP event kind may reach the log;
// the occurrences in between are counted.
const eventLogInterval = time.Second

// eventLog writes the bridge's events: link changes as they happen, the
// per-TLP ones (posted-lost, completion-timeout: thousands after a link
// drop) through a rate limiter.
type eventLog struct {
	out   *slog.Logger
	limit *ratelog.Limiter
}

// newEventLog returns the event log of one bridge; now is the limiter's
// clock (nil: the wall clock).
func newEventLog(log *slog.Logger, pair uint32, role bridge.Role, now func() time.Time) *eventLog {
	log = log.With("pair", pair, "role", role)
	return &eventLog{out: log, limit: ratelog.New(log, eventLogInterval, now)}
}

// perTLP says which event kinds come once per TLP rather than once per
// link change.
func perTLP(k bridge.EventKind) bool {
	return k == bridge.EventPostedLost || k == bridge.EventCompletionTimeout
}

func (l *eventLog) log(e bridge.Event) {
	if !perTLP(e.Kind) {
		l.out.Info("bridge event", "event", e)
		return
	}
	amount := e.Count
	if e.Kind == bridge.EventCompletionTimeout {
		amount = 1
	}
	l.limit.Log(slog.LevelWarn, e.Kind.String(), amount, "bridge event", "event", e)
}

// LateLog logs runners' timers firing late (driver.Runner.OnLate): the
// process was not running when their frames were due, so the peer saw that
// much silence, and a peer or conformance kit that reports it is right.
// One line a second, the others counted, whichever runner it was: a
// machine's stall stalls them all.
type LateLog struct{ limit *ratelog.Limiter }

// NewLateLog returns a LateLog writing to log.
func NewLateLog(log *slog.Logger) *LateLog { return newLateLog(log, nil) }

// newLateLog is NewLateLog on the clock now (nil: the wall clock).
func newLateLog(log *slog.Logger, now func() time.Time) *LateLog {
	return &LateLog{limit: ratelog.New(log, time.Second, now)}
}

// For returns the OnLate hook of one runner; args name it (its pair).
func (l *LateLog) For(args ...any) func(time.Duration) {
	args = args[:len(args):len(args)] // each call appends its own
	return func(late time.Duration) {
		l.limit.Log(slog.LevelWarn, "timer-late", 1, "bridge timer late: the process was not running when frames were due; the peer saw the silence", append(args, "late", late)...)
	}
}
