package bridge

import (
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// NumClasses is the number of flow-control classes, indexed by tlp.Class:
// tlp.Posted, tlp.NonPosted, tlp.Completion. Every per-class array in the
// bridge (queues, credits, Config.Credits, Counters.CreditStalls) has this
// length.
const NumClasses = int(tlp.Completion) + 1

// Credit types of the header and data credits of a class, in the order
// the frame header carries the limits (PH, PD, NPH, NPD, CplH, CplD).
func hdrType(c tlp.Class) encap.CreditType  { return encap.CreditType(2 * c) }
func dataType(c tlp.Class) encap.CreditType { return encap.CreditType(2*c + 1) }

// dataUnits is the number of 16-byte data credits m takes.
func dataUnits(m *meta) int {
	if !m.data {
		return 0
	}
	return (int(m.payload) + tlp.DataCreditBytes - 1) / tlp.DataCreditBytes
}
