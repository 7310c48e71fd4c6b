package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a client of QEMU's machine protocol: one JSON object per line,
// commands answered by "return" or "error", events interleaved. Each
// command carries an "id" that QEMU echoes in its reply; a reply is
// handed only to the command in flight with that id, never to a later one.
type qmp struct {
	conn   *net.UnixConn
	log    *slog.Logger
	cmd    sync.Mutex // one command in flight
	nextID uint64     // under cmd

	mu      sync.Mutex
	want    string        // id of the command in flight ("" none)
	reply   chan qmpMsg   // its reply (buffered: the reader never blocks)
	dropped uint64        // replies no command in flight asked for
	events  qmpEvents     // the newest events
	changed chan struct{} // closed and replaced when an event arrives
	err     error         // why the reader stopped
	done    chan struct{}
}

type qmpMsg struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
	QMP   json.RawMessage `json:"QMP"`
	// ID is any JSON value to QMP; ours are strings.
	ID json.RawMessage `json:"id"`
}

// Bounds of the event history: a guest (or QMP peer) that makes events
// without end must not grow memory without end. The newest event is kept
// whatever its size (a line is at most 1 MiB).
const (
	maxQMPEvents     = 1024
	maxQMPEventBytes = 1 << 20
)

// errQMPEventsDropped: waitEvent was asked to look at events the bounded
// history no longer holds.
var errQMPEventsDropped = errors.New("QMP events dropped")

type qmpEvent struct {
	name string
	data json.RawMessage
}

// size is what an event counts against maxQMPEventBytes, with its
// bookkeeping so that empty events count too.
func (e qmpEvent) size() int { return len(e.name) + len(e.data) + 64 }

// qmpEvents keeps the newest events with their absolute indexes: kept[i]
// is event first+i of all seen.
type qmpEvents struct {
	kept  []qmpEvent
	first int
	bytes int
}

func (h *qmpEvents) end() int { return h.first + len(h.kept) }

func (h *qmpEvents) add(e qmpEvent) {
	h.kept = append(h.kept, e)
	h.bytes += e.size()
	n := 0
	for len(h.kept)-n > maxQMPEvents || h.bytes > maxQMPEventBytes && len(h.kept)-n > 1 {
		h.bytes -= h.kept[n].size()
		n++
	}
	if n > 0 {
		// Cleared so the backing array holds no dropped data; append
		// reallocates it at about twice what is kept, no more.
		clear(h.kept[:n])
		h.kept = h.kept[n:]
		h.first += n
	}
}

func newQMP(c *net.UnixConn, log *slog.Logger) *qmp {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &qmp{conn: c, log: log, changed: make(chan struct{}), done: make(chan struct{})}
}

// dialQMP connects to QEMU's QMP socket, waiting for QEMU to create it,
// and leaves capabilities negotiation done.
func dialQMP(ctx context.Context, path string, exited <-chan struct{}, log *slog.Logger) (*qmp, error) {
	var c net.Conn
	for {
		var err error
		var d net.Dialer
		if c, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("vm: connecting to QMP at %s: %w", path, err)
		case <-exited:
			return nil, fmt.Errorf("vm: QEMU exited before its QMP socket answered: %w", err)
		case <-time.After(10 * time.Millisecond): // QEMU creates the socket during start-up
		}
	}
	q := newQMP(c.(*net.UnixConn), log)
	greeting := make(chan struct{})
	go q.read(greeting)
	select {
	case <-greeting:
	case <-q.done:
		return nil, fmt.Errorf("vm: QMP greeting: %w", q.err)
	case <-ctx.Done():
		q.close()
		return nil, fmt.Errorf("vm: QMP greeting: %w", ctx.Err())
	}
	if _, err := q.execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

// read reads QMP's messages until the connection ends, closing greeting
// at QEMU's greeting. A message that breaks the protocol (not JSON, a
// second greeting) ends it, as the connection's end does. It never waits
// on a command: a reply no command in flight asked for is dropped.
func (q *qmp) read(greeting chan struct{}) {
	defer close(q.done)
	sc := bufio.NewScanner(q.conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	greeted := false
	for sc.Scan() {
		var m qmpMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			q.stop(fmt.Errorf("vm: QMP sent %s: %w", quoteQMP(sc.Bytes()), err))
			return
		}
		switch {
		case m.QMP != nil && greeted:
			q.stop(fmt.Errorf("vm: QMP sent a second greeting: %s", quoteQMP(sc.Bytes())))
			return
		case m.QMP != nil:
			greeted = true
			close(greeting)
		case m.Event != "":
			q.mu.Lock()
			q.events.add(qmpEvent{name: m.Event, data: m.Data})
			close(q.changed)
			q.changed = make(chan struct{})
			q.mu.Unlock()
		default:
			q.deliver(m, sc.Bytes())
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("QEMU closed the QMP connection")
	}
	q.stop(err)
}

// deliver hands reply m (line as read) to the command in flight if it
// carries that command's id, and drops it otherwise: a reply to a command
// that gave up (its context ended), a second reply, or one with another
// id or none. Drops are logged at the 1st, 2nd, 4th, 8th... so that a
// flood of them costs a few lines.
func (q *qmp) deliver(m qmpMsg, line []byte) {
	var id string
	if m.ID != nil && json.Unmarshal(m.ID, &id) != nil {
		id = ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if id != "" && id == q.want {
		q.reply <- m // buffered for the one reply it takes
		q.want, q.reply = "", nil
		return
	}
	q.dropped++
	if n := q.dropped; n&(n-1) == 0 {
		q.log.Warn("vm: QMP reply dropped: not for the command in flight", "in_flight", q.want, "dropped", n, "reply", quoteQMP(line))
	}
}

// maxQMPQuote bounds the part of a message from QMP an error quotes.
const maxQMPQuote = 200

// quoteQMP is line quoted (one line), its first maxQMPQuote bytes only.
func quoteQMP(line []byte) string {
	if len(line) <= maxQMPQuote {
		return fmt.Sprintf("%q", line)
	}
	return fmt.Sprintf("%q... (%d bytes)", line[:maxQMPQuote], len(line))
}

func (q *qmp) stop(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
}

func (q *qmp) close() { _ = q.conn.Close() }

// execute runs one command, passing fds as SCM_RIGHTS with it (getfd).
func (q *qmp) execute(ctx context.Context, cmd string, args any, fds []int) (json.RawMessage, error) {
	q.cmd.Lock()
	defer q.cmd.Unlock()
	q.nextID++
	id := "dxpu-" + strconv.FormatUint(q.nextID, 10)
	req := map[string]any{"execute": cmd, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	reply := make(chan qmpMsg, 1)
	q.mu.Lock()
	q.want, q.reply = id, reply // before writing: the reply may come at once
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		if q.want == id { // unanswered: a late reply is dropped
			q.want, q.reply = "", nil
		}
		q.mu.Unlock()
	}()
	line := append(b, '\n')
	n, _, err := q.conn.WriteMsgUnix(line, oob, nil)
	if err == nil && n < len(line) {
		// A stream socket may take part of it (the fds went with that
		// part): the rest follows, or QEMU reads half a command.
		_, err = q.conn.Write(line[n:])
	}
	if err != nil {
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, err)
	}
	answer := func(m qmpMsg) (json.RawMessage, error) {
		if m.Error != nil {
			return nil, fmt.Errorf("vm: QMP %s: %s: %s", cmd, m.Error.Class, m.Error.Desc)
		}
		return m.Return, nil
	}
	select {
	case m := <-reply:
		return answer(m)
	case <-q.done:
		select {
		case m := <-reply: // answered just before the end
			return answer(m)
		default:
		}
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, q.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, ctx.Err())
	}
}

// waitEvent waits for an event named name, from index from of the events
// seen, whose data match; it returns the index after it. Only the newest
// events are kept (maxQMPEvents, maxQMPEventBytes): where from is older
// than the oldest kept, it fails at once with errQMPEventsDropped and
// returns the index of the oldest kept, rather than skip events unseen.
func (q *qmp) waitEvent(ctx context.Context, from int, name string, match func(json.RawMessage) bool) (int, error) {
	from = max(from, 0)
	for {
		q.mu.Lock()
		first, end, changed, err := q.events.first, q.events.end(), q.changed, q.err
		var evs []qmpEvent
		if from >= first && from < end {
			evs = slices.Clone(q.events.kept[from-first:]) // match runs unlocked
		}
		q.mu.Unlock()
		if from < first {
			return first, fmt.Errorf("vm: waiting for QMP event %s: %w: events %d to %d are gone (the history keeps the newest %d at most)", name, errQMPEventsDropped, from, first-1, maxQMPEvents)
		}
		for i, e := range evs {
			if e.name == name && (match == nil || match(e.data)) {
				return from + i + 1, nil
			}
		}
		from = end
		if err != nil {
			return from, fmt.Errorf("vm: waiting for QMP event %s: %w", name, err)
		}
		select {
		case <-changed:
		case <-q.done:
		case <-ctx.Done():
			return from, fmt.Errorf("vm: waiting for QMP event %s: %w", name, ctx.Err())
		}
	}
}

// eventCount returns how many events were seen so far (kept or not).
func (q *qmp) eventCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.events.end()
}
