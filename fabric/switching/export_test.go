package switching

// UDPPerDatagram makes d relay with the portable loop (a system call per
// datagram), the baseline the batched one is measured against.
func UDPPerDatagram(d *UDPDriver) { d.perDatagram = true }

// UDPLargestBatch returns the most datagrams one receive of d's Run took
// (1 for the portable loop); call it after Run returned.
func UDPLargestBatch(d *UDPDriver) int { return d.largest }

// UDPReceives returns how many receives d's Run made; call it after Run
// returned.
func UDPReceives(d *UDPDriver) int { return d.receives }

// PacketLargestBatch returns the most frames one receive of d's Run took
// on any port; call it after Run returned.
func PacketLargestBatch(d *PacketDriver) int {
	n := 0
	for _, p := range d.ports {
		n = max(n, p.largest)
	}
	return n
}
