package conform

import (
	"slices"
	"strconv"
	"strings"
)

// moreRules are the rules of docs/protocol.md beyond the first catalogue:
// every rule the specification defines is in the report, judged or n/a
// with the reason. They merge into the catalogue in the specification's
// order (sectionOrder).
var moreRules = []Rule{
	{"FRM-1", "raw Ethernet: EtherType 0x88B5, Ethernet padding ignored"},
	{"FRM-3", "frames fit the path MTU"},
	{"FRM-11", "Seq of frames without TLPs is the next sequence number (HELLO: the ISN)"},
	{"FRM-12", "the body of ACK, NAK and CREDIT frames ignored"},
	{"CTL-4", "RESET reasons 1 to 4, naming the session reset"},
	{"HSK-5", "the peer's HELLO parameters taken on coming up"},
	{"HSK-6", "HELLO-ACK while not up; a stale frame does not complete a handshake"},
	{"TMR-1", "timers within their bounds, Keepalive below DeadAfter"},
	{"TMR-2", "timers with room for scheduling delay"},
	{"SEQ-4", "TLPs behind a hole held, not dropped"},
	{"RTX-2", "RTO per RFC 6298"},
	{"RTX-4", "RACK-style retransmission (optional)"},
	{"CRD-1", "limits cumulative from the initial credits"},
	{"CRD-7", "no more delivered than the buffers hold"},
	{"CRD-8", "the HELLO's infinite mask governs; header masks ignored"},
	{"ORD-1", "posted requests do not pass posted requests"},
	{"ORD-5", "completions of one request in address order"},
	{"TAG-6", "a read that fits one completion gets exactly one"},
	{"IDT-1", "IDs translated between local and wire numbering"},
	{"IDT-2", "type 1 configuration requests turned into type 0"},
	{"IDT-3", "synthesized completions carry the expected completer ID"},
	{"LNK-8", "RESET ignored while not up; HELLOs after link-down carry peer session 0"},
	{"KEY-9", "control plane: key generations persisted, never reused"},
	{"KEY-10", "control plane: two-phase key change"},
	{"KEY-11", "control plane: both ends share a usable key"},
	{"KEY-12", "control plane: a key change never replaces a bridge"},
	{"KEY-13", "sealing details: salt lengths, handshake clock, epoch extension"},
}

// fixedNA gives the rules that no run can judge from the wire, and why;
// the ledger starts them n/a with this reason.
var fixedNA = map[string]string{
	"TMR-2":  "a deployment choice: the kit is told the implementation's timers and adds --slack to every bound",
	"RTX-2":  "the RTO's inputs (RTT samples, Karn's rule, backoff) are internal to the sender; the wire shows only its bounds, judged by RTX-3, NAK-2 and LNK-3",
	"RTX-4":  "optional (MAY): a sender that never uses it conforms",
	"CRD-7":  "whether the receiver's buffers are full is internal, and the kit never sends beyond the credits the implementation advertises (CRD-2 binds the kit too), so they never fill",
	"IDT-1":  "the local numbering is not on the wire: the kit sees wire IDs only (TAG-3 and TAG-6 judge those)",
	"IDT-2":  "type 1 configuration requests arise at a host's root port, which the kit does not drive",
	"IDT-3":  "synthesized completions go to the local side, not the wire; the test target reports their status, not their completer ID",
	"KEY-9":  "a control-plane rule (fabric/manager): nothing of it is on a pair's wire",
	"KEY-10": "a control-plane rule (fabric/manager): nothing of it is on a pair's wire",
	"KEY-11": "a control-plane rule (fabric/manager): nothing of it is on a pair's wire",
	"KEY-12": "a control-plane rule (fabric/manager): nothing of it is on a pair's wire",
	"KEY-13": "the kit seals and opens with bridge/seal, so a peer that gets a sealing detail wrong (salt, handshake clock, epoch) opens none of its frames or seals none it opens: that fails KEY-2, KEY-3 or KEY-5 on a keyed run, and no detail shows on the wire alone",
}

// sectionOrder is the order of the rule prefixes in the specification.
var sectionOrder = []string{"FRM", "CTL", "HSK", "TMR", "SEQ", "ACK", "NAK", "RTX", "CRD", "ORD", "TAG", "IDT", "LNK", "KEY"}

// specOrder compares rule identifiers in the specification's order.
func specOrder(a, b Rule) int {
	pa, na, _ := strings.Cut(a.ID, "-")
	pb, nb, _ := strings.Cut(b.ID, "-")
	if c := slices.Index(sectionOrder, pa) - slices.Index(sectionOrder, pb); c != 0 {
		return c
	}
	x, _ := strconv.Atoi(na)
	y, _ := strconv.Atoi(nb)
	return x - y
}

func init() {
	for _, r := range moreRules {
		if !slices.ContainsFunc(catalogue, func(c Rule) bool { return c.ID == r.ID }) {
			catalogue = append(catalogue, r)
		}
	}
	slices.SortStableFunc(catalogue, specOrder)
}
