package linkbench

import (
	"fmt"

	"github.com/dxpu/dxpu/bridge"
)

// maxEventLines bounds the events a result lists one by one: a link that
// goes down under load reports every write offered while it is down (tens
// of thousands), and the result must stay a readable size.
const maxEventLines = 32

// eventLog keeps the first maxEventLines events of both sides as lines
// and counts the rest by side and kind.
type eventLog struct {
	lines []string
	more  map[eventKey]*eventCount
	order []eventKey // first appearance, for a stable summary
}

type eventKey struct {
	side string
	kind bridge.EventKind
}

type eventCount struct{ events, tlps int }

func (l *eventLog) add(side string, e bridge.Event) {
	if len(l.lines) < maxEventLines {
		l.lines = append(l.lines, side+": "+e.String())
		return
	}
	k := eventKey{side, e.Kind}
	c := l.more[k]
	if c == nil {
		if l.more == nil {
			l.more = map[eventKey]*eventCount{}
		}
		c = &eventCount{}
		l.more[k] = c
		l.order = append(l.order, k)
	}
	c.events++
	c.tlps += e.Count
}

// addLine adds a line of the bench's own, kept whatever the count.
func (l *eventLog) addLine(s string) { l.lines = append(l.lines, s) }

// list returns the kept lines, then one line per side and kind counted.
func (l *eventLog) list() []string {
	out := append([]string(nil), l.lines...)
	for _, k := range l.order {
		c := l.more[k]
		s := fmt.Sprintf("%s: %d more %v events", k.side, c.events, k.kind)
		if k.kind == bridge.EventPostedLost {
			s += fmt.Sprintf(" (%d posted TLPs)", c.tlps)
		}
		out = append(out, s)
	}
	return out
}
