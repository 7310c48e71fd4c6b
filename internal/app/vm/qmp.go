package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a client of QEMU's machine protocol: one JSON object per line,
// commands answered by "return" or "error" in order, events interleaved.
type qmp struct {
	conn *net.UnixConn
	cmd  sync.Mutex // one command in flight

	mu      sync.Mutex
	replies chan qmpMsg
	events  []qmpMsg
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
}

// dialQMP connects to QEMU's QMP socket, waiting for QEMU to create it,
// and leaves capabilities negotiation done.
func dialQMP(ctx context.Context, path string, exited <-chan struct{}) (*qmp, error) {
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
	q := &qmp{conn: c.(*net.UnixConn), replies: make(chan qmpMsg, 1), changed: make(chan struct{}), done: make(chan struct{})}
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
// second greeting) ends it, as the connection's end does.
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
			q.events = append(q.events, m)
			close(q.changed)
			q.changed = make(chan struct{})
			q.mu.Unlock()
		default:
			q.replies <- m
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("QEMU closed the QMP connection")
	}
	q.stop(err)
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
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := q.conn.WriteMsgUnix(append(b, '\n'), oob, nil); err != nil {
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, err)
	}
	select {
	case m := <-q.replies:
		if m.Error != nil {
			return nil, fmt.Errorf("vm: QMP %s: %s: %s", cmd, m.Error.Class, m.Error.Desc)
		}
		return m.Return, nil
	case <-q.done:
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, q.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, ctx.Err())
	}
}

// waitEvent waits for an event named name, from index from of the events
// seen, whose data match; it returns the index after it.
func (q *qmp) waitEvent(ctx context.Context, from int, name string, match func(json.RawMessage) bool) (int, error) {
	for {
		q.mu.Lock()
		evs, changed, err := q.events, q.changed, q.err
		q.mu.Unlock()
		for i := from; i < len(evs); i++ {
			if evs[i].Event == name && (match == nil || match(evs[i].Data)) {
				return i + 1, nil
			}
		}
		from = len(evs)
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

// eventCount returns how many events were seen so far.
func (q *qmp) eventCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.events)
}
