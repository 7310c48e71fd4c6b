// Package conform is dxpu's conformance kit for bridge implementations
// (SmartNIC firmware, FPGA bridges, other software): it plays the other end
// of a pair against an implementation under test (the IUT) over UDP or raw
// Ethernet, runs scripted scenarios, and judges the IUT only from what it
// puts on the wire, rule by rule of docs/protocol.md (identifiers such as
// SEQ-3 or CRD-2).
//
// The kit's end of the pair is sans-I/O (end: frames and times in, frames
// out, verdicts to a ledger); a thin driver moves frames over a
// driver.Transport (bridge/udp, bridge/afpacket) and waits for events.
//
// The kit assumes the IUT's local PCIe side is memory that accepts writes
// and answers reads in [Options.Addr, Options.Addr+Options.Size). When the
// IUT offers the test target of the specification (section 12.1,
// Options.Doorbell), or the kit controls that side (Options.Stub, for
// testing dxpu's own bridge in process), it makes the IUT issue requests,
// and judges tags, completion timeouts, ordering of the IUT's own traffic
// and link-down behaviour too; without either those rules are n/a. The
// report has a line for every rule of the specification: rules the wire
// cannot show are n/a with the reason (fixedNA).
package conform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge/afpacket"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Timers are the IUT's timer settings as the kit assumes them (the
// protocol's defaults unless given), and the slack the kit allows on a real
// clock.
type Timers struct {
	HelloInterval     time.Duration // default 1 ms
	Keepalive         time.Duration // default 1 ms
	DeadAfter         time.Duration // default 10 ms
	AckDelay          time.Duration // default 20 us
	MaxRTO            time.Duration // default 20 ms
	CompletionTimeout time.Duration // default 50 ms
	// Slack is added to every real-time bound the kit judges (scheduling,
	// interrupt moderation); default 5 ms.
	Slack time.Duration
}

// check refuses a negative timer: withDefaults takes 0 for its default,
// and a negative one would be taken silently too.
func (t Timers) check() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"HelloInterval", t.HelloInterval}, {"Keepalive", t.Keepalive}, {"DeadAfter", t.DeadAfter},
		{"AckDelay", t.AckDelay}, {"MaxRTO", t.MaxRTO}, {"CompletionTimeout", t.CompletionTimeout}, {"Slack", t.Slack},
	} {
		if f.d < 0 {
			return units.Errorf("%w: %s %v is negative", ErrOptions, f.name, f.d)
		}
	}
	return nil
}

func (t Timers) withDefaults() Timers {
	def := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&t.HelloInterval, time.Millisecond)
	def(&t.Keepalive, time.Millisecond)
	def(&t.DeadAfter, 10*time.Millisecond)
	def(&t.AckDelay, 20*time.Microsecond)
	def(&t.MaxRTO, 20*time.Millisecond)
	def(&t.CompletionTimeout, 50*time.Millisecond)
	def(&t.Slack, 5*time.Millisecond)
	return t
}

// Options configure a run.
type Options struct {
	// Peer is the IUT: "udp:ADDR:PORT" or "eth:IFACE:MAC" (raw Ethernet
	// through AF_PACKET, needs CAP_NET_RAW). Ignored when Transport is set.
	Peer string
	// Local is the kit's UDP address (default 0.0.0.0:8855), where the
	// IUT sends its frames.
	Local string
	// Transport, when set, carries the frames instead of a socket the kit
	// opens (tests; the kit closes it when Run returns).
	Transport driver.Transport
	// Padded says Transport carries raw Ethernet frames, whose payloads
	// may be padded to the Ethernet minimum (so the frame length is not
	// judged against the body length, FRM-2).
	Padded bool
	// Role is the IUT's role; the kit plays the other.
	Role encap.Role
	// PairID is the pair's 24-bit ID.
	PairID uint32
	// Addr and Size delimit memory at the IUT's local side that the kit
	// may write and read (default 0x0 and 4096).
	Addr uint64
	Size int
	// Timers are the IUT's timer settings.
	Timers Timers
	// MTU is the IUT's largest frame from the dxpu header on (default
	// 1472, FRM-3).
	MTU int
	// Doorbell, when set, is the address of the IUT's test target (a
	// command block in its local side, section 12.1 of the specification):
	// through it the kit makes the IUT issue requests and judges tags,
	// ordering, completion timeouts and link-down behaviour from outside.
	Doorbell *uint64
	// Stub is the IUT's local side when the kit controls it.
	Stub *Stub
	// Scenarios selects scenarios by name (default all, see Scenarios).
	Scenarios []string
	// Keys make the pair keyed: the kit seals and opens every frame and
	// judges KEY-2..KEY-8 (unkeyed: KEY-1).
	Keys Keys
	// Seed seeds the kit's nonces, ISNs and data; 0 draws one at random
	// (the report names it, to reproduce a run).
	Seed uint64
	// Logger receives progress at debug level; nil discards.
	Logger *slog.Logger
}

// ErrOptions is wrapped by errors about Options.
var ErrOptions = errors.New("conform: bad options")

// ErrMismatch is wrapped by errors saying that the IUT's settings are not
// the ones the kit was given (timers, memory window): what it would
// otherwise fail are not rules but the kit's assumptions, so Run stops.
var ErrMismatch = errors.New("conform: the implementation does not match the kit's options")

// Run plays the other end against the IUT and returns the report. The
// error is for the kit's own failures (options, sockets, ctx); what the
// IUT does wrong is in the report.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.Timers.check(); err != nil {
		return Report{Peer: o.Peer, Role: o.Role.String()}, err
	}
	o.Timers = o.Timers.withDefaults()
	if o.Size == 0 {
		o.Size = 4096
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64() | 1
	}
	rep := Report{Peer: o.Peer, Role: o.Role.String(), Seed: o.Seed}
	if o.Role != encap.RoleHost && o.Role != encap.RoleGPU {
		return rep, fmt.Errorf("%w: role %d, want host (1) or gpu (2)", ErrOptions, o.Role)
	}
	if o.PairID >= 1<<24 {
		return rep, fmt.Errorf("%w: pair ID %#x does not fit 24 bits", ErrOptions, o.PairID)
	}
	if o.MTU < 0 {
		return rep, fmt.Errorf("%w: MTU %d is negative", ErrOptions, o.MTU)
	}
	if err := CheckMemory(o.Addr, o.Size, o.Doorbell); err != nil {
		return rep, err
	}
	o.Keys = o.Keys.withDefaults()
	if err := o.Keys.check(); err != nil {
		return rep, err
	}
	scen, err := pick(o.Scenarios)
	if err != nil {
		return rep, err
	}
	t, exact, err := o.transport()
	if err != nil {
		return rep, err
	}
	if o.Transport != nil {
		rep.Peer = "in-process transport"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kitRole := encap.RoleHost
	if o.Role == encap.RoleHost {
		kitRole = encap.RoleGPU
	}
	led := newLedger()
	k := &kit{opt: o, led: led, log: log, ctx: ctx, start: time.Now(), stub: o.Stub}
	k.end = newEnd(led, kitRole, o.PairID, exact, o.Timers, o.Seed)
	k.end.mtu = o.MTU
	if o.Keys.keyed() {
		k.end.keys = newKeyed(o.Keys, o.PairID, kitRole, k.start)
		k.end.keys.newKitNonce(k.end)
		led.na("KEY-1", "the pair is keyed (KEY-1 is for unkeyed pairs)")
	}
	k.link = startLink(t)
	defer k.link.close()
	watch := startStallWatch(k.start)
	defer watch.stop()
	k.end.stalled = watch.stalled
	if madeUpStalls != nil {
		k.end.stalled = madeUpStalls
	}
	if o.Stub != nil {
		k.stubNotify = o.Stub.notify
	}
	// A daemon started together with the kit may bind its socket after the
	// kit's first HELLOs: wait for its first frame before judging anything
	// (silent, so that it is still not up for HSK-1).
	led.scenario = "start"
	k.silent = true
	heard, err := k.await(startWait, func() bool { return k.frames > 0 || k.sealsNothing() })
	k.silent = false
	if err != nil {
		return rep, fmt.Errorf("conform: %w", err)
	}
	if k.frames == 0 && k.arrived > 0 {
		return k.noneOpened(rep)
	}
	if !heard {
		return rep, units.Errorf("conform: no frame from the implementation under test (%s) within %v: is it running, with the kit's address (--local) as its peer?", rep.Peer, startWait)
	}
	for _, s := range scen {
		log.Debug("conform: scenario", "name", s.name)
		led.scenario = s.name
		if err := s.run(k); err != nil {
			if errors.Is(err, errNoLink) {
				log.Debug("conform: scenario aborted", "name", s.name, "err", err)
				continue
			}
			rep.Duration = time.Since(k.start)
			if errors.Is(err, ErrMismatch) {
				return rep, err
			}
			rep.Results = led.results()
			return rep, fmt.Errorf("conform: scenario %s: %w", s.name, err)
		}
	}
	rep.Duration = time.Since(k.start)
	rep.Results = led.results()
	return rep, nil
}

// startWait is how long the kit waits for the IUT's first frame.
const startWait = 10 * time.Second

// unsealedWait is how long a keyed kit takes unsealed frames, none
// opening, before it concludes that the IUT runs unkeyed: a keyed IUT
// seals every frame, whatever its session, so that takes no DeadAfter.
const unsealedWait = 500 * time.Millisecond

// sealsNothing says the IUT has sent a keyed kit unsealed frames, and
// none that opened, for unsealedWait (the kit's stalls left out).
func (k *kit) sealsNothing() bool {
	return k.unsealed > 0 && k.frames == 0 && k.elapsed(k.firstUnsealed, k.now()) >= unsealedWait+k.timers.Slack
}

// noneOpened ends a keyed run whose IUT sent frames of which none opened.
// Unsealed ones fail KEY-2, saying so, and the report says what else was
// never exercised; sealed ones that do not open the kit cannot tell from
// a key or mode other than its own, so it says what it saw.
func (k *kit) noneOpened(rep Report) (Report, error) {
	rep.Duration = time.Since(k.start)
	if k.unsealed == 0 {
		return rep, units.Errorf("%w: %d frames from the implementation under test (%s) in %v, none opened (the latest: %s): does it hold the kit's key (--key-file, --key-generation, --seal-mode)?",
			ErrMismatch, k.arrived, rep.Peer, k.now().Round(time.Millisecond), k.unopenedWhy)
	}
	r := k.led.get("KEY-2")
	r.Verdict = Fail
	r.Reason = fmt.Sprintf("start: frames arrived but were not sealed: %d of the %d from the implementation had byte 0 bit 3 clear and none opened under --key-file (is it running unkeyed?)", k.unsealed, k.arrived)
	for _, r := range k.led.res {
		if r.Verdict == NA && r.Reason == "not exercised" {
			r.Reason = "not exercised: no frame of the implementation was sealed"
		}
	}
	rep.Results = k.led.results()
	return rep, nil
}

// transport opens the socket Peer names; exact reports whether frames are
// UDP payloads (no Ethernet padding).
func (o *Options) transport() (driver.Transport, bool, error) {
	if o.Transport != nil {
		return o.Transport, !o.Padded, nil
	}
	kind, rest, ok := strings.Cut(o.Peer, ":")
	if !ok {
		return nil, false, fmt.Errorf("%w: peer %q: want udp:ADDR:PORT or eth:IFACE:MAC", ErrOptions, o.Peer)
	}
	switch kind {
	case "udp":
		peer, err := netip.ParseAddrPort(rest)
		if err != nil {
			return nil, false, fmt.Errorf("%w: peer %q: %w", ErrOptions, o.Peer, err)
		}
		local := o.Local
		if local == "" {
			local = fmt.Sprintf("0.0.0.0:%d", encap.DefaultUDPPort)
		}
		la, err := netip.ParseAddrPort(local)
		if err != nil {
			return nil, false, fmt.Errorf("%w: local %q: %w", ErrOptions, local, err)
		}
		c, err := udp.Listen(la, peer)
		if err != nil {
			return nil, false, err
		}
		return c, true, nil
	case "eth":
		ifname, mac, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, false, fmt.Errorf("%w: peer %q: want eth:IFACE:MAC", ErrOptions, o.Peer)
		}
		hw, err := net.ParseMAC(mac)
		if err != nil {
			return nil, false, fmt.Errorf("%w: peer %q: %w", ErrOptions, o.Peer, err)
		}
		c, err := afpacket.ListenTagging(ifname, hw)
		if err != nil {
			return nil, false, err
		}
		return c, false, nil
	}
	return nil, false, fmt.Errorf("%w: peer %q: unknown transport %q (want udp or eth)", ErrOptions, o.Peer, kind)
}

// errNoLink aborts a scenario whose handshake failed; the rules it would
// have judged stay n/a.
var errNoLink = errors.New("no link to the implementation under test")

// link is the thin driver: a goroutine receives frames into a channel.
type link struct {
	t      driver.Transport
	frames chan frameIn
	errc   chan error
	done   chan struct{}
}

type frameIn struct {
	b  []byte
	at time.Time
}

func startLink(t driver.Transport) *link {
	l := &link{t: t, frames: make(chan frameIn, 4096), errc: make(chan error, 1), done: make(chan struct{})}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := t.Recv(buf)
			if err != nil {
				select {
				case l.errc <- err:
				default:
				}
				return
			}
			select {
			case l.frames <- frameIn{b: append([]byte(nil), buf[:n]...), at: time.Now()}:
			case <-l.done:
				return
			}
		}
	}()
	return l
}

func (l *link) close() {
	close(l.done)
	l.t.Close()
}

// kit runs scenarios: the end plus the driver.
type kit struct {
	*end
	opt        Options
	led        *ledger
	log        *slog.Logger
	ctx        context.Context
	start      time.Time
	link       *link
	stub       *Stub
	stubNotify chan struct{}
	closed     bool
}

func (k *kit) now() time.Duration { return time.Since(k.start) }

func (k *kit) send(b []byte) error {
	if k.keys != nil {
		b = k.keys.seal(k.end, k.now(), b)
	}
	return k.sendWire(b)
}

// sendWire sends b as it is: sealed already, or unsealed on purpose.
func (k *kit) sendWire(b []byte) error {
	k.lastSent = k.now()
	if err := k.link.t.Send(b); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

func (k *kit) flush() error {
	for _, f := range k.due(k.now()) {
		if err := k.send(f); err != nil {
			return err
		}
	}
	return nil
}

// await runs the link until cond holds or d passes; it reports whether
// cond held. The error is the kit's (transport, ctx). d does not count the
// kit's own stalls (stallWatch): every bound the kit judges is time the
// kit was there to see, so a loaded host that starves the kit, and with it
// an IUT beside it, makes a run slower, not a verdict wrong.
func (k *kit) await(d time.Duration, cond func() bool) (bool, error) {
	t0 := k.now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if err := k.flush(); err != nil {
			return false, err
		}
		if cond() {
			return true, nil
		}
		now := k.now()
		left := d - k.elapsed(t0, now)
		if left <= 0 {
			return false, nil
		}
		timer.Reset(max(min(left, k.nextDue(now)-now), 50*time.Microsecond))
		select {
		case f := <-k.link.frames:
			k.input(f.at.Sub(k.start), f.b)
			for more := true; more; {
				select {
				case f := <-k.link.frames:
					k.input(f.at.Sub(k.start), f.b)
				default:
					more = false
				}
			}
		case <-k.stubNotify:
		case <-timer.C:
		case err := <-k.link.errc:
			return false, fmt.Errorf("receive: %w", err)
		case <-k.ctx.Done():
			return false, k.ctx.Err()
		}
	}
}

// within runs the link until cond holds or bound passes, not counting the
// kit's own stalls; it returns whether cond held and the time it took, also
// without the stalls.
func (k *kit) within(bound time.Duration, cond func() bool) (bool, time.Duration, error) {
	t0 := k.now()
	for {
		left := bound - k.elapsed(t0, k.now())
		ok, err := k.await(max(left, 0), cond)
		el := k.elapsed(t0, k.now())
		if err != nil || ok || el >= bound {
			return ok, el, err
		}
	}
}

// watch runs the link for d, for judging what must not happen.
func (k *kit) watch(d time.Duration) error {
	_, err := k.await(d, func() bool { return false })
	return err
}

// sendTLPs queues tlps and sends them in one frame; it returns the first
// sequence number.
func (k *kit) sendTLPs(tlps ...[]byte) (uint32, error) {
	first := k.sndNxt
	for _, t := range tlps {
		k.queue(t)
	}
	f, err := k.tlpFrame(k.now(), first, len(tlps))
	if err != nil {
		return 0, err
	}
	return first, k.send(f)
}

// reply is how long the kit waits for something the IUT must do soon.
func (k *kit) reply() time.Duration { return 2*k.timers.MaxRTO + 4*k.timers.Slack }

// kitSpan is how far into the memory window the kit's reads and writes
// of more than one DW reach (ORD-5's 512-byte read at offset 32 the
// farthest); single-DW accesses anywhere in it never cross a page.
const kitSpan = 32 + 512

// CheckMemory checks the memory window (addr, size) and the test target's
// address (doorbell, nil without one) as the kit uses them: the window
// DW-aligned, of 64 bytes at least, and no request the kit makes in it
// across a 4 KiB boundary, which no PCIe read or write may cross; the
// test target's command block 64-byte aligned and its status block in
// one page (docs/protocol.md 12.1). It wraps ErrOptions.
func CheckMemory(addr uint64, size int, doorbell *uint64) error {
	if size < 64 || addr%4 != 0 {
		return fmt.Errorf("%w: --addr %#x --size %d: want a DW-aligned address and at least 64 bytes", ErrOptions, addr, size)
	}
	if span := uint64(min(size, kitSpan)); addr%4096+span > 4096 || addr+span < addr {
		return fmt.Errorf("%w: --addr %#x --size %d: the kit's requests reach %d bytes into the window, which would cross a 4 KiB boundary (no PCIe request may): start the window at least %d bytes before a page's end", ErrOptions, addr, size, span, span)
	}
	if doorbell != nil {
		d := *doorbell
		if d%64 != 0 || d > math.MaxUint64-4096 {
			return fmt.Errorf("%w: --doorbell %#x: want the test target's 64-byte aligned address (docs/protocol.md 12.1)", ErrOptions, d)
		}
	}
	return nil
}
