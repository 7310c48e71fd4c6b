package tlp

// Class returns the flow-control class of the TLP: Posted for memory writes
// and messages, Completion for completions, NonPosted for the rest.
func (v View) Class() Class { return v.Kind().Class() }

// Class returns the flow-control class of a TLP of kind k.
func (k Kind) Class() Class {
	switch {
	case k.IsPosted():
		return Posted
	case k.IsCompletion():
		return Completion
	}
	return NonPosted
}

// DataCredits returns the data credits (16-byte units) the payload needs;
// every TLP also needs one header credit of its class.
func (v View) DataCredits() int { return (v.PayloadLen() + 15) / 16 }

// HeaderCredits is the header credits every TLP consumes: one of its class
// (digest and prefixes included).
const HeaderCredits = 1

// DataCreditBytes is the payload covered by one data credit (4 DW).
const DataCreditBytes = 16

// Credits returns the flow-control class and the header and data credits
// the TLP consumes.
func (v View) Credits() (class Class, header, data int) {
	return v.Class(), HeaderCredits, v.DataCredits()
}

// DataCredits returns the data credits p's payload needs.
func (p *Packet) DataCredits() int {
	if !p.Kind.hasPayload() {
		return 0
	}
	return (4*p.dataDWs() + DataCreditBytes - 1) / DataCreditBytes
}

// Class returns p's flow-control class.
func (p *Packet) Class() Class { return p.Kind.Class() }
