package encap

import "fmt"

var msgTypeNames = [...]string{MsgTLP: "TLP", MsgAck: "ACK", MsgNak: "NAK", MsgCredit: "CREDIT", MsgControl: "CONTROL"}

// String returns TLP, ACK, NAK, CREDIT or CONTROL.
func (t MsgType) String() string {
	if t >= MsgTLP && t <= MsgControl {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}
