// Package progress shows how far a long command has come (vm demo's boot
// and copies, bench e2e's phases, bench link's runs, a long decode) on a
// terminal, and nothing at all where stderr is a file or a pipe: logs and
// CI output stay free of carriage-return redraws.
//
// It draws with github.com/schollz/progressbar/v3: one bar or spinner at a
// time is all the commands need, it is already a dependency (dxpu demo's
// bar), has no dependencies of its own beyond x/term, and is kept up
// (vbauerster/mpb is the choice for several concurrent bars, which no
// command has).
package progress

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar is a progress bar (total known) or a spinner (total < 0) on a
// terminal. A nil *Bar, what New returns off a terminal, does nothing, so
// callers never check.
type Bar struct {
	b *progressbar.ProgressBar
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New starts a bar on w for total steps (a spinner when total < 0) with
// what as its description, or returns nil when w is not a terminal.
func New(w io.Writer, total int, what string) *Bar {
	if w == nil || !IsTerminal(w) {
		return nil
	}
	b := progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(65*time.Millisecond), progressbar.OptionShowCount())
	_ = b.RenderBlank()
	return &Bar{b: b}
}

// Describe replaces the description: the phase now running.
func (p *Bar) Describe(what string) {
	if p != nil {
		p.b.Describe(what)
	}
}

// Add counts n steps done.
func (p *Bar) Add(n int) {
	if p != nil {
		_ = p.b.Add(n)
	}
}

// Set counts n steps done in all.
func (p *Bar) Set(n int) {
	if p != nil {
		_ = p.b.Set(n)
	}
}

// Finish clears the bar (the result follows on stdout) and stops a
// spinner's redraws. Safe to call twice.
func (p *Bar) Finish() {
	if p != nil && !p.b.IsFinished() {
		_ = p.b.Finish()
	}
}
