package vm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
)

const qmpGreeting = `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 8}, "package": ""}, "capabilities": ["oob"]}}`

// fakeQMPPeer is QEMU's side of a QMP connection, played by a test.
type fakeQMPPeer struct {
	c net.Conn
	r *bufio.Reader
}

type qmpCommand struct {
	Execute string          `json:"execute"`
	ID      json.RawMessage `json:"id"`
}

// next reads the client's next command.
func (p *fakeQMPPeer) next() (qmpCommand, error) {
	_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := p.r.ReadBytes('\n')
	if err != nil {
		return qmpCommand{}, fmt.Errorf("fake QMP: reading a command: %w", err)
	}
	var c qmpCommand
	if err := json.Unmarshal(line, &c); err != nil {
		return qmpCommand{}, fmt.Errorf("fake QMP: command %q: %w", line, err)
	}
	return c, nil
}

func (p *fakeQMPPeer) send(lines ...string) error {
	_ = p.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := p.c.Write([]byte(strings.Join(lines, "\n") + "\n"))
	return err
}

func (p *fakeQMPPeer) mustNext(t *testing.T, want string) qmpCommand {
	t.Helper()
	c, err := p.next()
	if err != nil {
		t.Fatal(err)
	}
	if c.Execute != want || len(c.ID) == 0 {
		t.Fatalf("fake QMP got command %q id %s; want %q with an id", c.Execute, c.ID, want)
	}
	return c
}

func (p *fakeQMPPeer) mustSend(t *testing.T, lines ...string) {
	t.Helper()
	if err := p.send(lines...); err != nil {
		t.Fatalf("fake QMP: sending: %v", err)
	}
}

// dialFakeQMP connects dialQMP to a fake QEMU on a unix socket that greets
// and answers qmp_capabilities, then leaves the connection to the test.
func dialFakeQMP(t *testing.T, log *slog.Logger) (*qmp, *fakeQMPPeer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		p   *fakeQMPPeer
		err error
	}
	peer := make(chan result, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			peer <- result{err: err}
			return
		}
		p := &fakeQMPPeer{c: c, r: bufio.NewReader(c)}
		if err = p.send(qmpGreeting); err == nil {
			var cmd qmpCommand
			if cmd, err = p.next(); err == nil {
				err = p.send(`{"return": {}, "id": ` + string(cmd.ID) + `}`)
			}
		}
		peer <- result{p, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := dialQMP(ctx, path, nil, log)
	r := <-peer
	if r.p != nil {
		t.Cleanup(func() { r.p.c.Close() })
	}
	if err != nil || r.err != nil {
		t.Fatalf("dialQMP: %v; fake QEMU: %v", err, r.err)
	}
	t.Cleanup(func() {
		q.close()
		select {
		case <-q.done:
		case <-time.After(10 * time.Second):
			t.Error("the QMP reader did not end within 10s of the connection's close")
		}
	})
	return q, r.p
}

type qmpResult struct {
	ret json.RawMessage
	err error
}

func executeAsync(ctx context.Context, q *qmp, cmd string) <-chan qmpResult {
	ch := make(chan qmpResult, 1)
	go func() {
		ret, err := q.execute(ctx, cmd, nil, nil)
		ch <- qmpResult{ret, err}
	}()
	return ch
}

func awaitResult(t *testing.T, ch <-chan qmpResult) qmpResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("execute did not return within 10s")
		return qmpResult{}
	}
}

func (q *qmp) droppedReplies() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// TestQMPLateReplyNotTakenByNextCommand: a command whose context ends
// before QEMU answers leaves its reply to come later; the next command
// gets its own reply, not that one, whether the late one arrives before
// the next command is sent or after.
func TestQMPLateReplyNotTakenByNextCommand(t *testing.T) {
	for _, lateFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("late reply before next command=%v", lateFirst), func(t *testing.T) {
			q, p := dialFakeQMP(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			first := executeAsync(ctx, q, "query-status")
			c1 := p.mustNext(t, "query-status")
			if r := awaitResult(t, first); !errors.Is(r.err, context.DeadlineExceeded) {
				t.Fatalf("first command: %s, %v; want it to time out", r.ret, r.err)
			}
			late := `{"return": {"status": "late answer to the first"}, "id": ` + string(c1.ID) + `}`
			if lateFirst {
				// The reader takes messages in order: once the event after
				// it is in, so is the late reply.
				p.mustSend(t, late, `{"event": "MARK"}`)
				wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer wcancel()
				if _, err := q.waitEvent(wctx, 0, "MARK", nil); err != nil {
					t.Fatal(err)
				}
			}
			second := executeAsync(context.Background(), q, "query-name")
			c2 := p.mustNext(t, "query-name")
			if bytes.Equal(c1.ID, c2.ID) {
				t.Fatalf("both commands have id %s", c1.ID)
			}
			if !lateFirst {
				p.mustSend(t, late)
			}
			p.mustSend(t, `{"return": {"name": "second"}, "id": `+string(c2.ID)+`}`)
			r := awaitResult(t, second)
			if r.err != nil || string(r.ret) != `{"name": "second"}` {
				t.Fatalf("second command got %s, %v; want its own reply {\"name\": \"second\"}", r.ret, r.err)
			}
			if n := q.droppedReplies(); n != 1 {
				t.Fatalf("%d replies dropped; want the late one", n)
			}
		})
	}
}

// TestQMPUnaskedRepliesDropped: replies with unknown ids, with none, with
// an id that is not ours, a second reply to an answered command, one
// quoting a huge id: the reader drops them all without blocking (an event
// sent after them arrives), logs a few bounded lines, and a later command
// still gets its own reply.
func TestQMPUnaskedRepliesDropped(t *testing.T) {
	var logs syncbuf.Buffer
	q, p := dialFakeQMP(t, slog.New(slog.NewTextHandler(&logs, nil)))
	first := executeAsync(context.Background(), q, "query-status")
	c1 := p.mustNext(t, "query-status")
	p.mustSend(t, `{"return": {"status": "running"}, "id": `+string(c1.ID)+`}`)
	if r := awaitResult(t, first); r.err != nil || string(r.ret) != `{"status": "running"}` {
		t.Fatalf("first command: %s, %v", r.ret, r.err)
	}
	stray := []string{
		`{"return": {}, "id": "` + strings.Repeat("x", 100<<10) + `"}`, // logged: the first drop
		`{"return": {"status": "again"}, "id": ` + string(c1.ID) + `}`, // answered already
	}
	for i := range 500 {
		stray = append(stray, fmt.Sprintf(`{"return": {}, "id": "other-%d"}`, i))
	}
	stray = append(stray, `{"return": {}}`, `{"error": {"class": "GenericError", "desc": "no id"}}`,
		`{"return": {}, "id": 1}`, `{"return": {}, "id": {"dxpu": 2}}`, `{"return": {}, "id": null}`, `{"return": {}, "id": ""}`)
	p.mustSend(t, stray...)
	p.mustSend(t, `{"event": "MARK", "data": {"n": 1}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := q.waitEvent(ctx, 0, "MARK", nil); err != nil {
		t.Fatalf("event after %d stray replies: %v", len(stray), err)
	}
	if n := q.droppedReplies(); n != uint64(len(stray)) {
		t.Fatalf("%d replies dropped; want %d", n, len(stray))
	}

	second := executeAsync(ctx, q, "query-name")
	c2 := p.mustNext(t, "query-name")
	p.mustSend(t, `{"return": {}, "id": "other-late"}`, `{"return": {"name": "vm"}, "id": `+string(c2.ID)+`}`)
	if r := awaitResult(t, second); r.err != nil || string(r.ret) != `{"name": "vm"}` {
		t.Fatalf("command after stray replies: %s, %v", r.ret, r.err)
	}

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	// Logged at the 1st, 2nd, 4th... 256th drop: 9 lines for 509.
	if len(lines) != 9 {
		t.Fatalf("%d log lines for %d dropped replies; want 9:\n%.2000s", len(lines), len(stray)+1, logs.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "QMP reply dropped") || len(l) > 1200 {
			t.Fatalf("log line (%d bytes) %.300q", len(l), l)
		}
	}
	if !strings.Contains(lines[0], fmt.Sprintf("xxxxx\\\"... (%d bytes)", len(stray[0]))) {
		t.Fatalf("first log line does not quote the huge reply's bounded prefix: %.300q", lines[0])
	}
}

// TestQMPEventHistoryBounded: 100000 events keep the history at the
// newest maxQMPEvents (and its array bounded); a wait from an index no
// longer kept is told so, with the oldest kept index; a wait for a fresh
// event still works.
func TestQMPEventHistoryBounded(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	const n = 100000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "TICK", "data": {"n": %d}}`+"\n", i)
	}
	p.mustSend(t, strings.TrimSuffix(b.String(), "\n"))
	waitfor.Until(t, "all 100000 events read", func() bool { return q.eventCount() == n })

	q.mu.Lock()
	kept, first, size, capacity := len(q.events.kept), q.events.first, q.events.bytes, cap(q.events.kept)
	last := q.events.kept[kept-1]
	q.mu.Unlock()
	if kept != maxQMPEvents || first != n-kept || capacity > 4*maxQMPEvents || size > maxQMPEventBytes {
		t.Fatalf("after %d events: %d kept from %d in an array of %d, %d bytes; want the newest %d, array at most %d", n, kept, first, capacity, size, maxQMPEvents, 4*maxQMPEvents)
	}
	if string(last.data) != fmt.Sprintf(`{"n": %d}`, n-1) {
		t.Fatalf("newest kept event has data %s", last.data)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next, err := q.waitEvent(ctx, 0, "TICK", nil)
	if !errors.Is(err, errQMPEventsDropped) || next != first || !strings.Contains(err.Error(), fmt.Sprintf("events 0 to %d are gone", first-1)) {
		t.Fatalf("waiting from a dropped index: %d, %v; want %v from %d", next, err, errQMPEventsDropped, first)
	}
	isLast := func(d json.RawMessage) bool { return string(d) == fmt.Sprintf(`{"n": %d}`, n-1) }
	if next, err := q.waitEvent(ctx, first, "TICK", isLast); err != nil || next != n {
		t.Fatalf("waiting from the oldest kept for the newest: %d, %v; want %d", next, err, n)
	}

	from := q.eventCount()
	p.mustSend(t, `{"event": "DEVICE_DELETED", "data": {"device": "gpu0"}}`)
	if next, err := q.waitEvent(ctx, from, "DEVICE_DELETED", nil); err != nil || next != from+1 {
		t.Fatalf("fresh event: %d, %v; want %d", next, err, from+1)
	}
}

// TestQMPEventHistoryBytesBounded: large events are kept up to
// maxQMPEventBytes, the newest always.
func TestQMPEventHistoryBytesBounded(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	big := strings.Repeat("x", 200<<10)
	for i := range 20 {
		p.mustSend(t, fmt.Sprintf(`{"event": "BIG", "data": {"n": %d, "pad": "%s"}}`, i, big))
	}
	huge := strings.Repeat("y", maxQMPEventBytes-1000)
	p.mustSend(t, `{"event": "HUGE", "data": "`+huge+`"}`)
	waitfor.Until(t, "all 21 events read", func() bool { return q.eventCount() == 21 })
	q.mu.Lock()
	kept, size := len(q.events.kept), q.events.bytes
	newest := q.events.kept[kept-1].name
	q.mu.Unlock()
	if kept != 1 || newest != "HUGE" || size > maxQMPEventBytes {
		t.Fatalf("%d events kept in %d bytes, newest %s; want only the HUGE one, at most %d bytes", kept, size, newest, maxQMPEventBytes)
	}
}
