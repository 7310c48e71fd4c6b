// Package docs holds dxpu's normative protocol specification, protocol.md,
// and the test that keeps it honest: the worked hex examples are generated
// from the code (tlp/encap builders, tlp.Packet.AppendTo) and compared byte
// for byte, rule identifiers are unique, and every rule the conformance kit
// (internal/app/conform) cites is defined. Run
//
//	go test ./docs -update
//
// to rewrite the examples after a deliberate change of the wire format.
package docs
