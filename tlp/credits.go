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
