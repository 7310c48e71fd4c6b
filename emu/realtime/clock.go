package realtime

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Clock paces a simulator to the wall clock. It implements host.Driver.
//
// The loop is event-driven: it runs what is due as soon as it is due or
// posted, polls (yielding the processor between looks) while the next
// event is near or work just happened, and only sleeps when nothing is
// due within Spin. Sleeping is what costs: a Go timer shorter than a
// millisecond sleeps about a millisecond on an idle Linux scheduler, and
// a wake-up from a channel takes tens of microseconds on a loaded one.
// Clocks in one process share the processors: at most all but one spin;
// the others yield, or sleep if they have no poller (see sleepers).
type Clock struct {
	S     *sim.Sim
	start time.Time
	mu    sync.Mutex
	in    inbox // guarded by mu
	spare inbox // the loop's side of the double buffer
	// posted counts the entries of in: a step that finds none skips the
	// lock.
	posted atomic.Int32
	// world is held while the simulation runs (a step, or the tail of
	// Advance): code outside the simulation's goroutine that touches the
	// world (a NetTLP port reading host memory) holds it too.
	world sync.Mutex
	wake  chan struct{}
	// flushers run after each step (see AddFlusher).
	flushers []func() bool
	// senders run at the end of each step (see AddSender).
	senders []func()
	// pollers run at the start of each step, idlers when the loop stops
	// polling (see AddPoller).
	pollers  []func() int
	idlers   []func()
	lastPoll time.Duration // when the pollers last ran (Elapsed)
	lastStep time.Duration // when the last step began (Elapsed)
	pollFrom int           // the poller to try first
	// running is set while RunWhile or Advance runs; hold hands the
	// sockets back PollHold after they return (see PollHold).
	running atomic.Bool
	hold    *time.Timer
	// Tick bounds one sleep of the loop when nothing is scheduled (default
	// 1ms): how often it looks at a condition that depends on the wall
	// clock alone.
	Tick time.Duration
	// Idle is how long RunWhile waits with nothing scheduled and nothing
	// posted before it reports a stall (default 2s).
	Idle time.Duration
	// Spin is how long the loop polls after the last piece of work, and
	// how near the next event must be for the loop to poll for it rather
	// than sleep (default 100us).
	Spin time.Duration
	// MaxLag is how far the simulation may fall behind the wall clock
	// before it gives up catching up and runs slower than the wall clock
	// (default 1ms).
	MaxLag time.Duration
	// PollHold is how long after RunWhile or Advance returns the pollers
	// are told the loop stopped polling (default 50us; 0: at once). A
	// caller that runs the clock again within it, as a CPU issuing MMIO
	// reads back to back does, finds the next answer in the socket for
	// its own poll: handing the sockets back to the runners' goroutines
	// between two requests woke both, and one in a few answers was then
	// taken by a goroutine that had to be scheduled first (tens of
	// microseconds on a loaded machine). Keep it below the bridges'
	// MinRTO less their AckDelay: frames that arrive while nobody runs
	// the clock wait this long for a runner.
	PollHold time.Duration
	// parked counts the times the loop slept instead of spinning because
	// no processor was free and it had nothing to poll (owned by the
	// loop's goroutine; read by tests once it returns).
	parked int
	// spinWoken counts the times a spinning loop woke this one from such
	// a sleep (sleepers).
	spinWoken atomic.Int32
	// spinningNow is whether the loop holds one of the spinners' places
	// (set and cleared as it takes and leaves one, never per turn): tests
	// tell their own spinning clock from another test's by it.
	spinningNow atomic.Bool
}

// New returns a clock for s, which must be at virtual time 0 (fresh).
func New(s *sim.Sim) *Clock {
	return &Clock{S: s, start: time.Now(), wake: make(chan struct{}, 1), Tick: time.Millisecond, Idle: 2 * time.Second, Spin: 100 * time.Microsecond, MaxLag: time.Millisecond, PollHold: 50 * time.Microsecond}
}

// Elapsed returns the wall time since the clock started.
func (c *Clock) Elapsed() time.Duration { return time.Since(c.start) }

// Post queues fn to run in the simulation at the current time; it may be
// called from any goroutine and never blocks.
func (c *Clock) Post(fn func()) {
	c.mu.Lock()
	c.in.recs = append(c.in.recs, posted{fn: fn})
	c.posted.Add(1)
	c.mu.Unlock()
	c.signal()
}

// PostTLP queues a copy of v for dst, delivered in the simulation at the
// current time in order with everything else posted. It may be called
// from any goroutine and never blocks; in steady state it allocates
// nothing (the copies live in a buffer the loop hands back).
func (c *Clock) PostTLP(dst pcie.Receiver, v tlp.View) {
	c.mu.Lock()
	c.in.add(dst, v)
	c.posted.Add(1)
	c.mu.Unlock()
	c.signal()
}

func (c *Clock) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// drain runs what was posted, in order. Called with world held.
func (c *Clock) drain() int {
	if c.posted.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	c.in, c.spare = c.spare, c.in
	c.posted.Store(0)
	c.mu.Unlock()
	return c.spare.run()
}

// AddFlusher registers f to run after each moment of simulated time the
// loop runs and after each step, with the world held: a sender that
// batches what a moment produced (a driver.QueuedSender with Batch set)
// sends it there. f reports whether it
// still holds work (the bridge pushed back); the loop then keeps polling
// instead of sleeping. Register before the clock runs.
func (c *Clock) AddFlusher(f func() bool) { c.flushers = append(c.flushers, f) }

// AddSender registers f to run at the end of each step, after the
// flushers, with the world held: a bridge runner's SendHeld
// (driver.Runner.HoldSends), so that what the step's polls received and
// its moments produced leaves in one batch of frames per runner, the
// acknowledgements riding on the data. Register before the clock runs.
func (c *Clock) AddSender(f func()) { c.senders = append(c.senders, f) }

// AddPoller registers poll to run at the start of each step, with the
// world held, and idle to run when the loop stops polling (it sleeps, or
// RunWhile returns): a bridge runner's Poll and PollIdle. Poll takes the
// frames its socket holds and posts their TLPs here, so that while the
// loop spins for its next event it also receives, on its own goroutine
// (busy polling), and the runner's goroutine sleeps. poll returns how many
// frames it took. Register before the clock runs.
func (c *Clock) AddPoller(poll func() int, idle func()) {
	c.pollers = append(c.pollers, poll)
	c.idlers = append(c.idlers, idle)
}

// idle tells the pollers the loop stops polling.
func (c *Clock) idle() {
	for _, f := range c.idlers {
		f()
	}
}

// idleLater tells the pollers the loop stopped polling PollHold from now,
// unless the loop runs again by then. Called by the loop's goroutine as
// it returns.
func (c *Clock) idleLater() {
	if len(c.idlers) == 0 {
		return
	}
	if c.PollHold <= 0 {
		c.idle()
		return
	}
	if c.hold == nil {
		c.hold = time.AfterFunc(c.PollHold, c.idleIfStopped)
		return
	}
	c.hold.Reset(c.PollHold)
}

// idleIfStopped runs on the hold timer's goroutine. Racing a loop that
// just started it may hand the sockets back once too often; the loop's
// next poll takes them again.
func (c *Clock) idleIfStopped() {
	if !c.running.Load() {
		c.idle()
	}
}

// step brings the simulation up to the wall clock, runs what is due and
// what was posted, flushes, and returns how many things ran and when the
// next event is due (ok false: none; a flusher's backlog, reported too,
// counts as due now).
func (c *Clock) step() (n int, next time.Duration, ok, backlog bool) {
	c.world.Lock()
	defer c.world.Unlock()
	// A poll is a system call per runner: when the next event is nearer
	// than that, look at the clock only, so that the event runs on time;
	// but not for long, or an engine stepping every 100 ns would starve
	// the sockets (whose runners leave them to this loop).
	if len(c.pollers) > 0 {
		// The previous step's reading of the clock is recent enough
		// for this choice (a step is a fraction of pollSkip), and a
		// reading less is a step shorter.
		now := c.lastStep
		if next, ok := c.S.Next(); !ok || next-now > pollSkip || now-c.lastPoll > pollEvery {
			c.lastPoll = now
			// Stop at the first runner that had frames: what they
			// carry runs now, and the next step polls the rest, starting
			// after this one so that none waits behind a busy one.
			for i := range c.pollers {
				k := (c.pollFrom + i) % len(c.pollers)
				if got := c.pollers[k](); got > 0 {
					n += got
					c.pollFrom = k + 1
					break
				}
			}
		}
	}
	// An overloaded machine must not make the simulation chase the wall
	// clock forever: events that cost more wall time than they advance
	// (an engine re-checking a full queue every 100 ns) would never catch
	// up. Beyond MaxLag behind, the world slows down instead.
	until := c.Elapsed()
	if lag := until - c.S.Now(); lag > c.MaxLag {
		c.start = c.start.Add(lag - c.MaxLag)
		until = c.S.Now() + c.MaxLag
	}
	c.lastStep = until
	// Each moment's events, then a flush of what they sent: an engine
	// that paces itself by a sender's backlog sees it drain as it would
	// on a wire, not only after the whole catch-up.
	for {
		at, ok := c.S.Next()
		if !ok || at > until {
			break
		}
		n += int(c.S.Run(at))
		for _, f := range c.flushers {
			f()
		}
	}
	// Run, not pcie.RunUntil: it brings the clock to now without
	// scheduling a sentinel (posted work is stamped with the wall time).
	c.S.Run(until)
	n += c.drain()
	for _, f := range c.flushers {
		backlog = f() || backlog
	}
	for _, f := range c.senders {
		f()
	}
	next, ok = c.S.Next()
	if backlog {
		next, ok = c.S.Now(), true
	}
	return n, next, ok, backlog
}

// RunWhile implements host.Driver: it runs the simulation in step with the
// wall clock while cond holds.
func (c *Clock) RunWhile(cond func() bool) bool {
	c.rebase()
	return c.run(cond, -1)
}

// Run drives the simulation on the wall clock until ctx ends, for a world
// (a GPU box's) that nobody waits on: RunWhile returns after a spell with
// nothing to do, and Run goes on.
func (c *Clock) Run(ctx context.Context) {
	for ctx.Err() == nil {
		c.RunWhile(func() bool { return ctx.Err() == nil })
	}
}

// run is RunWhile's loop; until (virtual time, < 0: none) is a moment cond
// depends on, to wake for like an event.
func (c *Clock) run(cond func() bool, until time.Duration) bool {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	// Times since base: reading the monotonic clock alone costs a
	// third of time.Now, and the loop reads it once a turn.
	base := time.Now()
	var lastWork, idleSince time.Duration
	procs := int32(runtime.GOMAXPROCS(0))
	spinning := false
	c.running.Store(true)
	defer func() {
		if spinning {
			spinners.Add(-1)
			c.spinningNow.Store(false)
		}
		c.running.Store(false)
		c.idleLater()
	}()
	for cond() {
		n, next, pending, backlog := c.step()
		if spinning {
			sleeping.wakeDue()
		}
		now := time.Since(base)
		if n > 0 {
			lastWork, idleSince = now, now
			continue
		}
		if pending {
			idleSince = now
		} else if now-idleSince > c.Idle {
			return false
		}
		// Right after work more is likely: poll without looking further.
		wait := time.Duration(0)
		if now-lastWork >= c.Spin {
			wait = c.untilDue(next, pending, until, c.Tick)
		}
		if wait <= c.Spin {
			// Something is due within microseconds (device latencies), or
			// just happened and more is likely: poll, as a kernel-bypass
			// loop does. Without yielding: a goroutine that yields stays
			// runnable, and a processor with runnable work never polls the
			// network, so the bridges feeding us would wait for the spin
			// to end. Spinning on one processor leaves another idle, and
			// an idle processor waits in the network poller. So spin only
			// while another processor stays free (other clocks in the
			// process spin too); else yield, if this loop polls its own
			// sockets, or sleep.
			if !spinning {
				spinning = true
				if spinners.Add(1) >= procs {
					spinning = false
					spinners.Add(-1)
					if len(c.pollers) > 0 {
						runtime.Gosched()
						continue
					}
					// Nothing of its own to poll: a loop of yields keeps
					// this processor busy, and a processor that is never
					// idle never polls the network, where the runners'
					// goroutines wait for the frames this loop waits for
					// (the runtime's monitor polls it every 10ms: an MMIO
					// read took 4ms). Sleep until something is posted or
					// the next event is due; a spinning loop wakes it then
					// (sleepers). Something due now is a sender's backlog:
					// what drains it comes from the network too.
					if d := min(c.untilDue(next, pending, until, c.Tick), c.Tick); d > 0 || backlog {
						d = max(d, minSleep)
						sleeping.add(c, d)
						c.sleep(&t, d)
						sleeping.remove(c)
						c.parked++
					}
				} else {
					c.spinningNow.Store(true)
				}
			}
			continue
		}
		if spinning {
			spinning = false
			spinners.Add(-1)
			c.spinningNow.Store(false)
		}
		// Sleep, but wake Spin early and poll the rest of the way.
		c.idle()
		c.sleep(&t, min(wait-c.Spin, c.Tick))
	}
	return true
}

// untilDue returns how long from now the next event (next, when pending;
// idle when none is) or the moment until (virtual time, < 0: none) is due.
func (c *Clock) untilDue(next time.Duration, pending bool, until, idle time.Duration) time.Duration {
	d := idle
	if pending || until >= 0 {
		now := c.Elapsed()
		if pending {
			d = next - now
		}
		if until >= 0 {
			d = min(d, until-now)
		}
	}
	return d
}

// sleep waits d, or until something is posted, on *t (made on first use).
func (c *Clock) sleep(t **time.Timer, d time.Duration) {
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-c.wake:
	case <-(*t).C:
	}
}

// rebase discounts wall time that passed outside the driver (set-up, the
// caller's own work): the simulation's clock counts only time during which
// it ran, so timers set just before, such as a request's completion
// timeout, are not fired by a pause that the simulation never saw.
func (c *Clock) rebase() {
	if lag := c.Elapsed() - c.S.Now(); lag > 0 {
		c.start = c.start.Add(lag)
	}
}

// Advance implements host.Driver: d of wall time passes while the
// simulation keeps running.
func (c *Clock) Advance(d time.Duration) {
	c.rebase()
	end := c.S.Now() + d
	c.run(func() bool { return c.Elapsed() < end }, end)
	c.world.Lock()
	pcie.RunUntil(c.S, end)
	c.world.Unlock()
}

// minSleep is the shortest sleep of a clock that may not spin: long
// enough for its processor to look at the network.
const minSleep = 5 * time.Microsecond

// pollSkip: an event due within this long is waited for without polling
// the runners (a poll of two sockets costs about half a microsecond).
const pollSkip = time.Microsecond

// pollEvery bounds the time between two polls while events keep coming.
const pollEvery = 5 * time.Microsecond

// spinners counts the clocks polling without yielding, each holding a
// processor.
var spinners atomic.Int32

// World returns the lock held while the simulation runs. Hold it to read
// or write the emulated world (host memory, say) from another goroutine:
// between steps nothing in the simulation moves.
func (c *Clock) World() sync.Locker { return &c.world }

// posted is one entry of the inbox: a function, or a TLP in the inbox's
// buffer for dst.
type posted struct {
	fn     func()
	dst    pcie.Receiver
	off, n int
}

// inbox is what other goroutines posted since the last drain.
type inbox struct {
	recs []posted
	buf  []byte
}

// add queues a copy of v for dst.
func (q *inbox) add(dst pcie.Receiver, v tlp.View) {
	off := len(q.buf)
	q.buf = append(q.buf, v...)
	q.recs = append(q.recs, posted{dst: dst, off: off, n: len(v)})
}

// run delivers and runs what q holds, in order, empties it and returns
// how many entries ran.
func (q *inbox) run() int {
	for i := range q.recs {
		r := &q.recs[i]
		if r.fn != nil {
			r.fn()
		} else {
			r.dst.ReceiveTLP(tlp.View(q.buf[r.off : r.off+r.n : r.off+r.n]))
		}
	}
	n := len(q.recs)
	q.reset()
	return n
}

// reset empties the inbox, keeping its storage, and drops references so a
// drained closure or receiver is not kept alive.
func (q *inbox) reset() {
	clear(q.recs)
	q.recs, q.buf = q.recs[:0], q.buf[:0]
}
