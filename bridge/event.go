package bridge

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// EventKind says what happened.
type EventKind uint8

// Events the bridge reports through NextEvent.
const (
	// EventLinkUp: the handshake completed; Session is the new session.
	EventLinkUp EventKind = iota + 1
	// EventLinkDown: the peer fell silent for DeadAfter, sent RESET or
	// restarted, or Reset was called. Reason says which.
	EventLinkDown
	// EventSurpriseRemoval (host side only, with every EventLinkDown): the
	// device behind the virtual downstream port is gone.
	EventSurpriseRemoval
	// EventPostedLost: posted TLPs that were not acknowledged by the peer
	// when the link went down, or offered while it was down. Count and, for
	// memory writes, Addrs. They were not delivered, or delivered without
	// their acknowledgement arriving: an upper bound.
	EventPostedLost
	// EventCompletionTimeout: a forwarded request was not completed within
	// CompletionTimeout; a CA completion was delivered in its place.
	EventCompletionTimeout
)

func (k EventKind) String() string {
	switch k {
	case EventLinkUp:
		return "link-up"
	case EventLinkDown:
		return "link-down"
	case EventSurpriseRemoval:
		return "surprise-removal"
	case EventPostedLost:
		return "posted-lost"
	case EventCompletionTimeout:
		return "completion-timeout"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one thing the embedding code must know about.
type Event struct {
	Kind    EventKind
	At      time.Duration
	Session uint32
	Reason  string
	// EventPostedLost.
	Count int
	Addrs []uint64
	// EventCompletionTimeout: the request as the local side issued it.
	RequesterID tlp.ID
	Tag         uint16
}

// String writes the event for logs, its time as `dxpu help units` spells
// durations (us, not µs).
func (e Event) String() string {
	at := sim.FormatDuration(e.At)
	switch e.Kind {
	case EventPostedLost:
		return fmt.Sprintf("%v at %s: %d posted TLPs", e.Kind, at, e.Count)
	case EventCompletionTimeout:
		return fmt.Sprintf("%v at %s: requester %v tag %d", e.Kind, at, e.RequesterID, e.Tag)
	case EventLinkDown:
		return fmt.Sprintf("%v at %s: %s", e.Kind, at, e.Reason)
	}
	return fmt.Sprintf("%v at %s session %#x", e.Kind, at, e.Session)
}
