package switching

// Reason says why a frame got its verdict. The values index the counters
// and equal enum reason in xdp/switch.c.
type Reason uint8

const (
	ReasonToGPU       Reason = iota // forwarded host -> GPU
	ReasonToHost                    // forwarded GPU -> host
	ReasonTxToGPU                   // transmitted towards a GPU (egress port and pair)
	ReasonTxToHost                  // transmitted towards a host (egress port and pair)
	ReasonSpoofed                   // known pair, wrong port, MAC or IP: dropped
	ReasonFault                     // dropped by DropPPM fault injection
	ReasonControl                   // CONTROL message: slow path
	ReasonUnknownPair               // pair not in the table: slow path
	ReasonMalformed                 // dxpu frame too short or wrong version: dropped
	ReasonNotDXPU                   // not a dxpu frame: kernel stack
	ReasonNoRoom                    // cannot be rewritten (no headroom for a VLAN tag; UDP mode: far endpoint has no IP): dropped
	NumReasons
)

var reasonNames = [NumReasons]string{
	"to_gpu", "to_host", "tx_to_gpu", "tx_to_host", "spoofed", "fault",
	"control", "unknown_pair", "malformed", "not_dxpu", "no_room",
}

// String returns the reason's metric label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "invalid"
}

// Verdict is what happens to a frame.
type Verdict uint8

const (
	VerdictDrop     Verdict = iota // discarded
	VerdictForward                 // rewritten in place, sent out of Result.Egress
	VerdictSlowPath                // handed to the Go slow path (AF_XDP socket or AF_PACKET listener)
	VerdictPass                    // not dxpu: left to the kernel stack
)

var verdictNames = [...]string{"drop", "forward", "slow_path", "pass"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "invalid"
}

// XDP action codes (enum xdp_action).
const (
	XDPAborted  = 0
	XDPDrop     = 1
	XDPPass     = 2
	XDPTx       = 3
	XDPRedirect = 4
)

// XDPAction returns the action the XDP program returns for this verdict
// when no AF_XDP socket takes the slow path.
func (v Verdict) XDPAction() uint32 {
	switch v {
	case VerdictForward:
		return XDPRedirect
	case VerdictSlowPath, VerdictPass:
		return XDPPass
	}
	return XDPDrop
}
