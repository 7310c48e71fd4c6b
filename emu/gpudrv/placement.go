package gpudrv

import "fmt"

// Placement says where a channel's GPFIFO ring and pushbuffer live.
type Placement int

const (
	// HostMemory: the CPU writes commands into host memory and the GPU
	// fetches them with DMA reads. Across a fabric every submission costs
	// two round trips (the ring entry, then the segment) before it runs.
	HostMemory Placement = iota
	// DeviceMemory: ring and pushbuffer in VRAM, written by the CPU
	// through BAR1 with posted writes (as NVIDIA drivers can place the
	// GPFIFO and pushbuffer in video memory); the GPU fetches them
	// locally. A submission crosses the fabric as posted writes one way:
	// with the semaphore's posted write back, a launch and its sync cost
	// about one round trip.
	DeviceMemory
)

func (p Placement) String() string {
	switch p {
	case HostMemory:
		return "host"
	case DeviceMemory:
		return "device"
	}
	return fmt.Sprintf("Placement(%d)", int(p))
}
