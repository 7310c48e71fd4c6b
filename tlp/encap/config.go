package encap

// Config tells ParseFrame which UDP ports carry TLPs and how strict to be.
// The zero value (and a nil *Config) means the defaults.
type Config struct {
	// UDPPort is the destination port of dxpu-udp frames; 0 = DefaultUDPPort.
	UDPPort uint16
	// NetTLPPortMin and NetTLPPortMax bound the UDP ports read as NetTLP
	// (either port of the datagram in range). Both 0 = 0x3000..0x30ff.
	NetTLPPortMin, NetTLPPortMax uint16
	// NoNetTLP disables NetTLP recognition.
	NoNetTLP bool
	// RejectTruncated makes ParseFrame fail with ErrTruncated when the
	// frame holds fewer bytes than its lengths declare (a live receive path
	// wants this; a capture reader with a snap length does not).
	RejectTruncated bool
	// SkipIPv4Checksum accepts IPv4 headers whose checksum does not verify
	// (captures taken on a host with checksum offload).
	SkipIPv4Checksum bool
}

var defaultConfig Config

func (c *Config) udpPort() uint16 {
	if c.UDPPort == 0 {
		return DefaultUDPPort
	}
	return c.UDPPort
}

func (c *Config) isNetTLPPort(p uint16) bool {
	if c.NoNetTLP {
		return false
	}
	lo, hi := c.NetTLPPortMin, c.NetTLPPortMax
	if lo == 0 && hi == 0 {
		lo, hi = NetTLPPortBase, NetTLPPortMax
	}
	return p >= lo && p <= hi
}
