// Package frametest builds dxpu frames that tests send to a bridge from
// outside it (a stranger's frames, a peer's broken ones), and runs the
// bridge they go to. Only tests import it (internal/layering keeps it out
// of the binary); the bridge/driver package's own in-package tests cannot,
// since it imports bridge/driver.
package frametest

import "github.com/dxpu/dxpu/tlp/encap"

// Hello returns a CONTROL frame of pair carrying a HELLO from the GPU side
// (session 9, window 64, the other fields 0): the dxpu header and the
// message, with no Ethernet, IP or UDP header around them. It is a new
// slice on each call, for the caller to change.
func Hello(pair uint32) []byte {
	hello := make([]byte, encap.HeaderLen, encap.HeaderLen+encap.HelloLen)
	h := encap.Header(hello)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgControl)
	h.SetPairID(pair)
	hello = append(hello, (&encap.Control{Type: encap.CtlHello, Role: encap.RoleGPU, Session: 9, Window: 64}).AppendTo(nil)...)
	encap.Header(hello).SetBodyLen(len(hello) - encap.HeaderLen)
	return hello
}
