package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// inFlight returns the id of the command in flight ("" none).
func (q *qmp) inFlight() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.want
}

// TestQMPErrorReply: QEMU's error answer to a command is the command's
// error, with its class and description.
func TestQMPErrorReply(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	res := executeAsync(context.Background(), q, "device_del")
	c := p.mustNext(t, "device_del")
	p.mustSend(t, `{"error": {"class": "DeviceNotFound", "desc": "Device 'gpu0' not found"}, "id": `+string(c.ID)+`}`)
	r := awaitResult(t, res)
	if r.err == nil || r.err.Error() != "vm: QMP device_del: DeviceNotFound: Device 'gpu0' not found" {
		t.Fatalf("error reply: %s, %v; want the command's error", r.ret, r.err)
	}
}

// TestQMPDoubleReplyDropped: a second reply with the id of a command
// just answered, in the same write as the first, is dropped and counted:
// it is not left for the command to take.
func TestQMPDoubleReplyDropped(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Stall)
	defer cancel()
	for i := range 10 {
		res := executeAsync(ctx, q, "query-status")
		c := p.mustNext(t, "query-status")
		p.mustSend(t, fmt.Sprintf(`{"return": {"n": %d}, "id": %s}`, i, c.ID), `{"return": {"n": -1}, "id": `+string(c.ID)+`}`)
		if r := awaitResult(t, res); r.err != nil || string(r.ret) != fmt.Sprintf(`{"n": %d}`, i) {
			t.Fatalf("command %d: %s, %v", i, r.ret, r.err)
		}
		p.mustSend(t, fmt.Sprintf(`{"event": "MARK", "data": {"n": %d}}`, i))
		if _, err := q.waitEvent(ctx, 0, "MARK", func(d json.RawMessage) bool { return string(d) == fmt.Sprintf(`{"n": %d}`, i) }); err != nil {
			t.Fatal(err)
		}
		if n := q.droppedReplies(); n != uint64(i+1) {
			t.Fatalf("after %d doubled replies, %d dropped; want every second one", i+1, n)
		}
	}
}

// TestQMPLargeCommandWrittenWhole: a command larger than the socket's
// buffers goes out whole (sendmsg on a stream socket may take part of
// it): QEMU reads it and its arguments intact, and the next command too.
func TestQMPLargeCommandWrittenWhole(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	pad := strings.Repeat("x", 1<<20) // more than a socket buffer holds (about 200 KiB)
	res := make(chan qmpResult, 1)
	go func() {
		ret, err := q.execute(context.Background(), "big", map[string]any{"pad": pad}, nil)
		res <- qmpResult{ret, err}
	}()
	_ = p.c.SetReadDeadline(time.Now().Add(waitfor.Stall))
	line, err := p.r.ReadBytes('\n')
	var c struct {
		Execute   string          `json:"execute"`
		ID        json.RawMessage `json:"id"`
		Arguments struct {
			Pad string `json:"pad"`
		} `json:"arguments"`
	}
	if err != nil || json.Unmarshal(line, &c) != nil || c.Execute != "big" || c.Arguments.Pad != pad {
		t.Fatalf("fake QMP read %d bytes of the command (%v), %q with a pad of %d bytes; want it whole, %d bytes of pad",
			len(line), err, c.Execute, len(c.Arguments.Pad), len(pad))
	}
	p.mustSend(t, `{"return": {}, "id": `+string(c.ID)+`}`)
	if r := awaitResult(t, res); r.err != nil {
		t.Fatal(r.err)
	}
	next := executeAsync(context.Background(), q, "query-status")
	c2 := p.mustNext(t, "query-status")
	p.mustSend(t, `{"return": {"status": "running"}, "id": `+string(c2.ID)+`}`)
	if r := awaitResult(t, next); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestQMPReplyBeforeEnd: a reply that came before QEMU closed the
// connection is the command's answer even when the command sees the end
// at the same time (here: still writing a large command while QEMU
// answers and closes).
func TestQMPReplyBeforeEnd(t *testing.T) {
	big := map[string]any{"pad": strings.Repeat("x", 1<<20)} // more than a socket buffer holds (about 200 KiB)
	// The command picks between reply and end at random: 20 trials.
	for i := range 20 {
		q, p := dialFakeQMP(t, nil)
		res := make(chan qmpResult, 1)
		go func() {
			ret, err := q.execute(context.Background(), "big", big, nil)
			res <- qmpResult{ret, err}
		}()
		var id string
		waitfor.Until(t, "the command in flight", func() bool { id = q.inFlight(); return id != "" })
		p.mustSend(t, `{"return": {"ok": true}, "id": "`+id+`"}`)
		if err := p.c.(*net.UnixConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-q.done:
		case <-time.After(waitfor.Stall):
			t.Fatal("the QMP reader did not end at QEMU's close")
		}
		p.mustNext(t, "big") // unblocks the command's write
		if r := awaitResult(t, res); r.err != nil || string(r.ret) != `{"ok": true}` {
			t.Fatalf("trial %d: command answered, then the connection closed: %s, %v; want the answer", i, r.ret, r.err)
		}
	}
}

// TestQMPProtocolErrorEndsReader: a line that is not JSON ends the reader:
// the command in flight and any wait for an event fail with it, at once.
func TestQMPProtocolErrorEndsReader(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	res := executeAsync(context.Background(), q, "query-status")
	p.mustNext(t, "query-status")
	p.mustSend(t, "not json", `{"event": "AFTER"}`)
	r := awaitResult(t, res)
	if r.err == nil || !strings.Contains(r.err.Error(), `vm: QMP sent "not json"`) {
		t.Fatalf("command when QMP broke the protocol: %s, %v; want the reader's error", r.ret, r.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Stall)
	defer cancel()
	type waited struct {
		next int
		err  error
	}
	w := make(chan waited, 1)
	go func() {
		next, err := q.waitEvent(ctx, 0, "NEVER", nil)
		w <- waited{next, err}
	}()
	select {
	case r := <-w:
		if r.err == nil || !strings.Contains(r.err.Error(), `vm: waiting for QMP event NEVER: vm: QMP sent "not json"`) || ctx.Err() != nil {
			t.Fatalf("waitEvent after the reader stopped: %d, %v; want the reader's error at once", r.next, r.err)
		}
	case <-time.After(waitfor.Stall):
		t.Fatal("waitEvent after the reader stopped did not return")
	}
	if n := q.eventCount(); n != 0 {
		t.Fatalf("%d events recorded after the broken line; want 0", n)
	}
}

// TestQMPWaitEventIndexes: a wait from just before the oldest kept event
// is told that it is gone; a negative index is the first event; a waiter
// that keeps up with more events than the history holds sees each once
// and is never told they are gone.
func TestQMPWaitEventIndexes(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Stall)
	defer cancel()
	p.mustSend(t, `{"event": "A"}`, `{"event": "B"}`)
	waitfor.Until(t, "2 events read", func() bool { return q.eventCount() == 2 })
	if next, err := q.waitEvent(ctx, -1, "A", nil); err != nil || next != 1 {
		t.Fatalf("waitEvent from -1 for the first event: %d, %v; want 1", next, err)
	}

	// A waiter paced by the test: each event is matched once, in order.
	var looked atomic.Int64
	total := maxQMPEvents + 100
	type waited struct {
		next int
		err  error
	}
	w := make(chan waited, 1)
	from := q.eventCount()
	go func() {
		next, err := q.waitEvent(ctx, from, "TICK", func(d json.RawMessage) bool {
			looked.Add(1)
			return string(d) == "\"last\""
		})
		w <- waited{next, err}
	}()
	for i := range total {
		data := fmt.Sprint(i)
		if i == total-1 {
			data = `"last"`
		}
		p.mustSend(t, `{"event": "TICK", "data": `+data+`}`)
		waitfor.Until(t, fmt.Sprintf("the waiter looking at event %d", i), func() bool {
			select {
			case r := <-w:
				w <- r
				return true
			default:
			}
			return looked.Load() >= int64(i+1)
		})
		if n := looked.Load(); n != int64(i+1) {
			t.Fatalf("after %d events the waiter matched %d: each event once", i+1, n)
		}
	}
	r := <-w
	if r.err != nil || r.next != from+total {
		t.Fatalf("waiter that kept up with %d events: %d, %v; want %d", total, r.next, r.err, from+total)
	}

	// The history now starts past event 0: index first-1 is gone.
	q.mu.Lock()
	first := q.events.first
	q.mu.Unlock()
	if next, err := q.waitEvent(ctx, first-1, "TICK", nil); !errors.Is(err, errQMPEventsDropped) || next != first {
		t.Fatalf("waitEvent from %d, just before the oldest kept (%d): %d, %v; want %v", first-1, first, next, err, errQMPEventsDropped)
	}
}

// TestQMPEventHistoryKeepsNewestWhole: an event whose line is the
// longest QMP may send (1 MiB) counts more than the byte bound and is
// still kept: the newest event always is.
func TestQMPEventHistoryKeepsNewestWhole(t *testing.T) {
	q, p := dialFakeQMP(t, nil)
	head, tail := `{"event": "HUGE", "data": "`, `"}`
	line := head + strings.Repeat("z", 1<<20-1-len(head)-len(tail)) + tail
	p.mustSend(t, `{"event": "SMALL"}`, line)
	waitfor.Until(t, "2 events read", func() bool { return q.eventCount() == 2 })
	q.mu.Lock()
	kept := len(q.events.kept)
	var newest qmpEvent
	if kept > 0 {
		newest = q.events.kept[kept-1]
	}
	q.mu.Unlock()
	if kept != 1 || newest.name != "HUGE" || newest.size() <= maxQMPEventBytes {
		t.Fatalf("%d events kept, newest %q of size %d; want the HUGE one alone, over the bound %d", kept, newest.name, newest.size(), maxQMPEventBytes)
	}
}

// TestQMPDialEnds: dialQMP gives up at once when QEMU exited before its
// socket answered, and fails when QEMU refuses qmp_capabilities.
func TestQMPDialEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitfor.Stall)
	defer cancel()
	exited := make(chan struct{})
	close(exited)
	_, err := dialQMP(ctx, filepath.Join(t.TempDir(), "never.sock"), exited, nil)
	if err == nil || !strings.Contains(err.Error(), "QEMU exited before its QMP socket answered") || ctx.Err() != nil {
		t.Fatalf("dialQMP after QEMU exited: %v; want it said at once", err)
	}

	path := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		p := &fakeQMPPeer{c: c, r: bufio.NewReader(c)}
		if p.send(qmpGreeting) != nil {
			return
		}
		if cmd, err := p.next(); err == nil {
			p.send(`{"error": {"class": "CommandNotFound", "desc": "no capabilities here"}, "id": ` + string(cmd.ID) + `}`)
		}
		p.next() // until the client closes
	}()
	q, err := dialQMP(ctx, path, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "vm: QMP qmp_capabilities: CommandNotFound: no capabilities here") {
		if q != nil {
			q.close()
		}
		t.Fatalf("dialQMP when QEMU refused qmp_capabilities: %v; want that error", err)
	}
}

// TestQuoteQMPBound: a line up to maxQMPQuote bytes is quoted whole,
// a longer one is cut there and says its length.
func TestQuoteQMPBound(t *testing.T) {
	whole := strings.Repeat("a", maxQMPQuote)
	if got := quoteQMP([]byte(whole)); got != `"`+whole+`"` {
		t.Errorf("quoteQMP of %d bytes: %.40s...; want it whole", maxQMPQuote, got)
	}
	if got, want := quoteQMP([]byte(whole+"b")), `"`+whole+`"... (201 bytes)`; got != want {
		t.Errorf("quoteQMP of %d bytes: %q; want %q", maxQMPQuote+1, got, want)
	}
}
