package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dxpu/dxpu/internal/guest"
)

// ErrNoResult is a guest that stopped without printing its report.
var ErrNoResult = errors.New("vm: the guest printed no report")

// GuestEvent is one DXPU-EVENT line of the guest tool.
type GuestEvent struct {
	Name string
	Data map[string]any
	At   time.Duration // since QEMU started
}

// console follows the guest's serial console: it copies every byte to the
// log and picks out the guest tool's events and report.
type console struct {
	start time.Time

	mu     sync.Mutex
	up     time.Duration // when /init ran (0: not yet)
	events []GuestEvent
	report *guest.Report
	resAt  time.Duration
	exit   int // the tool's exit status, -1 until known
	closed bool
	fatal  string // a QEMU message after which the guest runs no more
	// qemuErr is QEMU's first line on stderr naming an error (or its
	// first line at all), cut to maxQEMUErr bytes: the cause a QEMU that
	// exited at start-up gives (a KVM that cannot run the guest says
	// "failed to set MSR" before its assertion fails).
	qemuErr string
	changed chan struct{}
}

func newConsole(start time.Time) *console {
	return &console{start: start, exit: -1, changed: make(chan struct{})}
}

func (c *console) update(fn func()) {
	c.mu.Lock()
	fn()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// follow reads the console until EOF (QEMU exited), copying it to log.
func (c *console) follow(r io.Reader, log io.Writer) {
	defer c.update(func() { c.closed = true })
	sc := bufio.NewScanner(io.TeeReader(r, log))
	sc.Buffer(make([]byte, 64<<10), 16<<20) // the report carries the config space in hex
	var inResult, resultTooLong bool
	var result strings.Builder
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		at := time.Since(c.start)
		switch {
		case strings.HasSuffix(line, guestUp):
			c.update(func() { c.up = at })
		case strings.HasPrefix(line, guest.EventPrefix) && len(line) <= maxEventLine:
			ev := GuestEvent{At: at}
			if json.Unmarshal([]byte(strings.TrimPrefix(line, guest.EventPrefix)), &ev.Data) == nil {
				ev.Name, _ = ev.Data["event"].(string)
				c.update(func() { c.events = append(c.events, ev) })
			}
		case line == guest.ResultBegin:
			inResult, resultTooLong = true, false
			result.Reset()
		case line == guest.ResultEnd && inResult:
			inResult = false
			var rep guest.Report
			if resultTooLong {
				break // not a report the tool prints: none
			}
			if err := json.Unmarshal([]byte(result.String()), &rep); err == nil {
				c.update(func() { c.report, c.resAt = &rep, at })
			}
		case inResult:
			if result.Len()+len(line) > maxReport {
				resultTooLong = true
				result.Reset()
			}
			if !resultTooLong {
				result.WriteString(line)
			}
		case strings.HasPrefix(line, "DXPU-EXIT "):
			if n, err := strconv.Atoi(strings.TrimPrefix(line, "DXPU-EXIT ")); err == nil {
				c.update(func() { c.exit = n })
			}
		}
	}
	_, _ = io.Copy(log, r) // a line too long for the scanner: keep logging
}

// followErrors reads QEMU's stderr, copying it to log, and notes a
// message after which the guest cannot go on (a KVM internal error leaves
// the VM paused, not exited).
func (c *console) followErrors(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(io.TeeReader(r, log))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "KVM internal error") {
			fatal := quoteQEMU(line)
			c.update(func() { c.fatal = fatal })
		}
		if line == "" {
			continue
		}
		// The first line naming an error, else the first line.
		if cur := c.qemuError(); cur == "" || !namesError(cur) && namesError(line) {
			cut := quoteQEMU(line)
			c.update(func() { c.qemuErr = cut })
		}
	}
	_, _ = io.Copy(log, r)
}

// maxQEMUErr bounds the QEMU message an error quotes.
const maxQEMUErr = 300

// What follow keeps of the guest's output (all of it goes to the log):
// an event line longer than maxEventLine is not taken as an event (the
// guest tool's are under 1 KiB), and a report whose text passes maxReport
// is not taken as a report (the tool's are a few KiB).
const (
	maxEventLine = 64 << 10
	maxReport    = 1 << 20
)

// quoteQEMU is line as an error may quote it: control characters (a \r
// inside the line) as spaces, cut to at most maxQEMUErr bytes at a
// character's start.
func quoteQEMU(line string) string {
	line = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, line)
	if len(line) <= maxQEMUErr {
		return line
	}
	cut := maxQEMUErr
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut]
}

func namesError(line string) bool { return strings.Contains(strings.ToLower(line), "error") }

// qemuError returns QEMU's first error line on stderr ("" if none yet).
func (c *console) qemuError() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qemuErr
}

// waitFor waits until cond (called with c.mu held) holds, or the console
// closed (then it returns ErrNoResult unless cond holds).
func (c *console) waitFor(ctx context.Context, what string, cond func() bool) error {
	for {
		c.mu.Lock()
		ok, closed, fatal, changed := cond(), c.closed, c.fatal, c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		if fatal != "" {
			return fmt.Errorf("vm: QEMU: %s", fatal)
		}
		if closed {
			return fmt.Errorf("vm: QEMU's console closed before %s", what)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("vm: waiting for %s: %w", what, ctx.Err())
		}
	}
}
