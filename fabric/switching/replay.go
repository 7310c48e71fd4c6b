package switching

import "github.com/dxpu/dxpu/fabric/table"

// ReplayFrame is a captured frame and the switch port it arrives on.
type ReplayFrame struct {
	Port string
	Data []byte
}

// Outcome is what the switch did with one replayed frame.
type Outcome struct {
	Action  uint32  // XDP action (XDPRedirect, XDPDrop, XDPPass)
	Verdict Verdict // userspace path only
	Reason  Reason  // userspace path only
	Egress  string  // port name, userspace path only
	Frame   []byte  // the frame as transmitted, when forwarded
}

// AssignPorts picks each frame's ingress port from its source MAC (the
// port of the table endpoint with that MAC), or def when no endpoint has it.
func AssignPorts(t *table.Table, frames [][]byte, def string) []ReplayFrame {
	byMAC := IngressByMAC(t)
	out := make([]ReplayFrame, len(frames))
	for i, f := range frames {
		out[i] = ReplayFrame{Port: def, Data: f}
		if len(f) >= 12 {
			if p, ok := byMAC[[6]byte(f[6:12])]; ok {
				out[i].Port = p
			}
		}
	}
	return out
}

// Replay runs frames through the forwarder (after SetPorts and Update)
// and returns one outcome per frame. Frames arriving on a port not in
// ports get ifindex 0 (an unmanaged interface).
func (f *Forwarder) Replay(frames []ReplayFrame, ports map[string]Port) []Outcome {
	names := map[uint32]string{}
	for n, p := range ports {
		names[p.Index] = n
	}
	out := make([]Outcome, len(frames))
	for i, fr := range frames {
		buf := make([]byte, Headroom+len(fr.Data))
		copy(buf[Headroom:], fr.Data)
		res := f.Forward(buf, Headroom, ports[fr.Port].Index)
		o := Outcome{Action: res.Verdict.XDPAction(), Verdict: res.Verdict, Reason: res.Reason}
		if res.Verdict == VerdictForward {
			o.Frame = buf[res.Off:]
			o.Egress = names[res.Egress]
		}
		out[i] = o
	}
	return out
}
