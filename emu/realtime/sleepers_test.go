package realtime

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// TestSleepersBookkeeping: the earliest wake-up is kept as sleepers come
// and go, a due one is woken once and forgotten, one not due is left.
func TestSleepersBookkeeping(t *testing.T) {
	s := newSleepers()
	a, b := New(sim.New(1)), New(sim.New(1))
	s.add(a, time.Hour)
	s.add(b, 0)
	if got, want := s.next.Load(), s.list[1].at; got != want {
		t.Fatalf("next %d, want b's %d", got, want)
	}
	s.wakeDue()
	if a.spinWoken.Load() != 0 || b.spinWoken.Load() != 1 || len(b.wake) != 1 {
		t.Fatalf("woken a %d b %d (b's wake holds %d), want only b once", a.spinWoken.Load(), b.spinWoken.Load(), len(b.wake))
	}
	if len(s.list) != 1 || s.list[0].c != a || s.next.Load() != s.list[0].at {
		t.Fatalf("after the wake: %d sleepers, next %d; want a alone", len(s.list), s.next.Load())
	}
	s.remove(a)
	if len(s.list) != 0 || s.next.Load() != noSleeper {
		t.Fatalf("after remove: %d sleepers, next %d; want none", len(s.list), s.next.Load())
	}
}

// withSpinner sets GOMAXPROCS to 2 and runs a clock that spins, holding
// one of them, until the test ends: another clock then may not spin.
func withSpinner(t *testing.T) {
	// The count of spinning clocks is the package's: a clock of an earlier
	// test still winding down would be taken for this one's spinner, and
	// once it stopped the clock under test was free to spin (3 turns, 0
	// asleep, under -race). Wait for none, then for this one.
	for start := time.Now(); spinners.Load() != 0; runtime.Gosched() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d clocks of earlier tests still spin", spinners.Load())
		}
	}
	procs := runtime.GOMAXPROCS(2)
	spinner := New(sim.New(1))
	spinner.Spin = time.Minute
	spinner.Idle = time.Hour // it must not give up (2s idle by default) while a test needs it
	var stop atomic.Bool
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		spinner.Post(func() {})
		spinner.RunWhile(func() bool { return !stop.Load() })
	}()
	t.Cleanup(func() {
		stop.Store(true)
		<-spun
		runtime.GOMAXPROCS(procs)
	})
	// Wait for this spinner itself: the count may be a clock of an
	// earlier test starting to spin after the wait above, and a spinner
	// that found both places taken sleeps and tries again later, leaving
	// the clock under test free to spin (20 events, asleep 4 times, under
	// -race beside busy loops).
	for start := time.Now(); !spinner.spinningNow.Load(); runtime.Gosched() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the spinner never got a place: %d clocks spin", spinners.Load())
		}
	}
}

// TestClockWithoutPollersLeavesTheNetworkPolled: a clock with nothing of
// its own to poll, in its spin window while another clock spins on the
// other processor, must not yield in a loop: a processor that always has
// a goroutine to run never polls the network, and the frames the clock
// waits for arrive on a socket of the runtime's poller (a runner's
// goroutine posts them). With that loop the runtime's monitor found the
// datagram after 10ms, tens of thousands of turns; sleeping, the loop
// takes a few. Not parallel: it sets GOMAXPROCS.
func TestClockWithoutPollersLeavesTheNetworkPolled(t *testing.T) {
	withSpinner(t)
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	c := New(sim.New(1))
	c.Spin = time.Minute // always in the spin window
	var got atomic.Bool
	waiting := make(chan struct{})
	go func() {
		var b [16]byte
		close(waiting)
		if _, _, err := rx.ReadFrom(b[:]); err == nil {
			c.Post(func() { got.Store(true) })
		}
	}()
	<-waiting
	turns := 0
	c.Post(func() {}) // work: the loop spins from here
	c.RunWhile(func() bool {
		if turns++; turns == 2 {
			if _, err := tx.Write([]byte("frame")); err != nil {
				t.Error(err)
				return false
			}
		}
		return !got.Load()
	})
	if !got.Load() {
		t.Fatal("RunWhile returned before the datagram came")
	}
	// Turns alone are the measure. Asleep 0 times is no failure: when the
	// write's syscall outlasts a monitor tick (a loaded machine), the
	// runtime hands the processor to a thread that polls the network, and
	// the datagram is read before the loop looks again (3 turns, 0 asleep).
	if turns > 1000 {
		t.Fatalf("%d turns (%d asleep) until a datagram on loopback came: the loop kept the processor from the network poller", turns, c.parked)
	}
	t.Logf("%d turns, %d asleep", turns, c.parked)
}

// TestSpinningClockWakesSleeper: two clocks without pollers on two
// processors: one spins, the other may not and sleeps between its events,
// 200us apart. A Go timer that short fires up to a millisecond late once
// its processor idles in the network poller; the spinning loop wakes the
// sleeper when its event is due instead. Not parallel: it sets
// GOMAXPROCS and counts on the package's spinners.
func TestSpinningClockWakesSleeper(t *testing.T) {
	withSpinner(t)
	s := sim.New(1)
	c := New(s)
	c.Spin = time.Minute
	// Events until the spinner has woken the sleeper once, up to a bound:
	// on a loaded machine the spinner's thread may be off the CPU when an
	// event is due, and the sleeper's own timer wins that race (20 events
	// woken 0 times under -race beside busy loops); a spinner that never
	// wakes sleepers loses every one of them.
	const maxEvents = 2000
	ran := 0
	var tick func()
	tick = func() {
		if ran++; ran < maxEvents && c.spinWoken.Load() == 0 {
			s.After(200*time.Microsecond, tick)
		}
	}
	s.After(0, tick)
	c.RunWhile(func() bool { return ran < maxEvents && c.spinWoken.Load() == 0 })
	if c.parked == 0 || c.spinWoken.Load() == 0 {
		t.Fatalf("%d events: asleep %d times, woken by the spinning clock %d times; want both", ran, c.parked, c.spinWoken.Load())
	}
	t.Logf("%d events: asleep %d times, woken by the spinner %d times", ran, c.parked, c.spinWoken.Load())
}
