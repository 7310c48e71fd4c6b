package switchd

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// tableFile writes a table file the way a careful tool does: a whole file
// renamed into place (the watch never reads half of one), each with an
// mtime of its own, set rather than left to the clock, whose granularity
// may give two quick writes the same one.
type tableFile struct {
	t     *testing.T
	path  string
	mtime time.Time
}

func (f *tableFile) write(data []byte) {
	f.t.Helper()
	tmp := f.path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.mtime = f.mtime.Add(time.Second)
	if err := os.Chtimes(tmp, f.mtime, f.mtime); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.t.Fatal(err)
	}
}

// table writes switchtest.Table at version v: the same size for every
// one-digit version, so only the mtime tells two of them apart.
func (f *tableFile) table(v uint64) {
	f.t.Helper()
	tb := switchtest.Table()
	tb.Version = v
	b, err := json.Marshal(tb)
	if err != nil {
		f.t.Fatal(err)
	}
	f.write(b)
}

// touch gives the file a new mtime, its content unchanged.
func (f *tableFile) touch() {
	f.t.Helper()
	f.mtime = f.mtime.Add(time.Second)
	if err := os.Chtimes(f.path, f.mtime, f.mtime); err != nil {
		f.t.Fatal(err)
	}
}

// fileWatch records what a WatchTableFile did: the versions it applied
// (0 for a nil table) and the records it logged.
type fileWatch struct {
	mu      sync.Mutex
	applied []uint64
	logged  []slog.Record
}

func (w *fileWatch) apply(tb *table.Table) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tb == nil {
		w.applied = append(w.applied, 0)
		return
	}
	w.applied = append(w.applied, tb.Version)
}

// versions returns the versions applied, each run of one version as one
// (a table rewritten with the same content is applied again, harmlessly).
func (w *fileWatch) versions() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Compact(slices.Clone(w.applied))
}

func (w *fileWatch) last() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.applied) == 0 {
		return 0
	}
	return w.applied[len(w.applied)-1]
}

// lines returns the records logged, one line each: level, message, attrs.
func (w *fileWatch) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.logged {
		s := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
		out = append(out, s)
	}
	return out
}

func (w *fileWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *fileWatch) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logged = append(w.logged, r.Clone())
	return nil
}
func (w *fileWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *fileWatch) WithGroup(string) slog.Handler      { return w }

// TestWatchTableFile: the watch applies each new table written to the
// file and not the one there when it started (Run applied that); an
// unusable file (JSON cut short, a table that fails validation) is not
// applied and is logged once, naming the file, and the next good file is
// applied; a file removed is no change and logs nothing, recreated it is
// applied; the end of ctx ends the watch.
func TestWatchTableFile(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Millisecond
	// A few looks of the watch at a file it must leave alone: a watch
	// that wrongly applies or logs it does so within them.
	looks := func() { time.Sleep(3 * interval) }
	f := &tableFile{t: t, path: filepath.Join(t.TempDir(), "table.json"), mtime: time.Now().Add(-time.Hour)}
	f.table(1)
	w := &fileWatch{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchTableFile(ctx, f.path, interval, w.apply, slog.New(w))
	}()
	defer func() {
		if t.Failed() {
			t.Logf("applied %v; logged:\n%s", w.versions(), strings.Join(w.lines(), "\n"))
		}
	}()
	check := func(when string, versions []uint64, errors int) {
		t.Helper()
		if got := w.versions(); !slices.Equal(got, versions) {
			t.Fatalf("%s: applied versions %v, want %v (0: a nil table)", when, got, versions)
		}
		if got := w.lines(); len(got) != errors {
			t.Fatalf("%s: logged %d records, want %d:\n%s", when, len(got), errors, strings.Join(got, "\n"))
		}
	}
	looks()
	check("the file unchanged since the start", nil, 0)

	// Version 2, the same size as 1: only the mtime changed. On a loaded
	// machine the watch may take its first look after this write, so
	// each poll gives the file a new mtime: a change either way.
	f.table(2)
	waitfor.Until(t, "table version 2 applied", func() bool {
		if w.last() == 2 {
			return true
		}
		f.touch()
		return false
	})
	check("after version 2", []uint64{2}, 0)

	// Unusable files: each logged once, naming the file, none applied.
	for i, bad := range []struct {
		name string
		data []byte
		says string
	}{
		{"JSON cut short", []byte(`{"version": 3, "pairs": [`), "unexpected end"},
		{"a table that fails validation", invalidTable(t, 3), "appears twice"},
	} {
		f.write(bad.data)
		waitfor.Until(t, bad.name+" logged", func() bool { return len(w.lines()) > i })
		looks()
		check("after "+bad.name, []uint64{2}, i+1)
		line := w.lines()[i]
		if !strings.HasPrefix(line, "ERROR ") || !strings.Contains(line, "unusable; keeping the table in force") ||
			!strings.Contains(line, f.path) || !strings.Contains(line, bad.says) {
			t.Errorf("%s logged %q; want an error naming %s and saying %q", bad.name, line, f.path, bad.says)
		}
	}
	f.table(4)
	waitfor.Until(t, "table version 4 applied after the unusable files", func() bool { return w.last() == 4 })
	check("after version 4", []uint64{2, 4}, 2)

	// Removed: the table in force stays, quietly; recreated: applied.
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	looks()
	check("with the file removed", []uint64{2, 4}, 2)
	f.table(5)
	waitfor.Until(t, "table version 5 applied from the recreated file", func() bool { return w.last() == 5 })
	check("after the file was recreated", []uint64{2, 4, 5}, 2)

	cancel()
	waitfor.Until(t, "WatchTableFile returning once its context ended", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// invalidTable is a well-formed table file at version v with two pairs of
// one ID: Validate refuses it.
func invalidTable(t *testing.T, v uint64) []byte {
	t.Helper()
	tb := switchtest.Table()
	tb.Version = v
	tb.Pairs = append(tb.Pairs, tb.Pairs[0])
	b, err := json.Marshal(tb)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Validate() == nil {
		t.Fatalf("table %s passes validation", b)
	}
	return b
}
