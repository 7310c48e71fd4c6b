package conform

// Rule is one rule of docs/protocol.md that the kit judges.
type Rule struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

// catalogue lists the rules the kit judges, in the order of the
// specification; the report has one line for each.
var catalogue = []Rule{
	{"FRM-2", "UDP payload is exactly the header and the body"},
	{"FRM-4", "version 1"},
	{"FRM-5", "message type 1 to 5"},
	{"FRM-6", "pair ID: own frames carry it, frames of another pair are dropped"},
	{"FRM-7", "reserved fields sent as 0"},
	{"FRM-8", "TLP count and length table agree with the body"},
	{"FRM-9", "TLP lengths and well-formed TLPs"},
	{"FRM-10", "a malformed frame is dropped whole and harms nothing"},
	{"CTL-1", "control messages: version, role, session"},
	{"CTL-2", "HELLO fields in range"},
	{"CTL-3", "KEEPALIVE answered at once with its probe number"},
	{"HSK-1", "HELLO repeated while not up"},
	{"HSK-2", "HELLO answered with HELLO-ACK echoing the session"},
	{"HSK-3", "up once its session is echoed"},
	{"HSK-4", "new, non-zero session nonce on every start"},
	{"SEQ-1", "first TLP at the ISN, consecutive numbers"},
	{"SEQ-2", "retransmissions carry the original number and bytes"},
	{"SEQ-3", "delivery in sequence order, exactly once"},
	{"ACK-1", "no acknowledgement before the TLP is accepted for delivery"},
	{"ACK-2", "Ack never moves backwards"},
	{"ACK-3", "every frame once up carries Ack and credits"},
	{"ACK-4", "SACK bits only for TLPs held"},
	{"ACK-5", "acknowledgement within AckDelay without reverse traffic"},
	{"NAK-1", "NAK at once for a hole"},
	{"NAK-2", "retransmission on NAK"},
	{"RTX-1", "no more in flight than the peer's window"},
	{"RTX-3", "lost TLPs retransmitted after the RTO"},
	{"CRD-2", "never beyond the advertised credit limit"},
	{"CRD-3", "infinite mask fixed for the session"},
	{"CRD-4", "credit limits only move forward, never beyond the buffers"},
	{"CRD-5", "credits returned and advertised once consumed"},
	{"CRD-6", "a credit-stalled sender probes and resumes"},
	{"ORD-2", "posted requests and completions pass stalled non-posted requests"},
	{"ORD-3", "non-posted requests do not pass posted requests"},
	{"ORD-4", "completions do not pass posted requests"},
	{"TAG-1", "wire tags unique among outstanding requests, restored on completions"},
	{"TAG-2", "wire tags within the peer's tag space"},
	{"TAG-3", "completions carry the request's tag and requester; unmatched ones dropped"},
	{"TAG-4", "completion timeout answered with CA, tag quarantined"},
	{"TAG-5", "requests wait for a tag, never dropped"},
	{"LNK-1", "never silent longer than Keepalive while up"},
	{"LNK-2", "link declared down after DeadAfter of silence"},
	{"LNK-3", "an outage shorter than DeadAfter is invisible"},
	{"LNK-4", "outstanding requests answered UR on link down"},
	{"LNK-5", "new session after link down, nothing of the old one carried over"},
	{"LNK-6", "RESET of the own session honoured, of another ignored"},
	{"LNK-7", "a peer's new session ends the old one"},
	{"KEY-1", "sealed bit 0 on pairs without keys"},
	{"KEY-2", "every frame of a keyed pair sealed under the pair key and mode"},
	{"KEY-3", "unsealed, forged, unknown-key, replayed and too-old frames dropped; the window's edge accepted"},
	{"KEY-4", "a fresh key nonce per session; session keys bound to both sides' nonces"},
	{"KEY-5", "HELLO, HELLO-ACK and RESET under the handshake key, numbers increasing; replays refused"},
	{"KEY-6", "epochs move only after the peer's echo, within 2 x RekeyAfter, without loss"},
	{"KEY-7", "the previous epoch's key open for a grace, then retired"},
	{"KEY-8", "a new key generation opened once installed, and followed"},
}

// Rules returns the rules the kit judges, in report order.
func Rules() []Rule { return append([]Rule(nil), catalogue...) }

func summaryOf(id string) string {
	for _, r := range catalogue {
		if r.ID == id {
			return r.Summary
		}
	}
	return ""
}
