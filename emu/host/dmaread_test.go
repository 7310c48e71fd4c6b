package host

import (
	"bytes"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// completionSink records the completions reaching the device below a root
// port, with their arrival time.
type completionSink struct {
	s    *sim.Sim
	tags []uint16
	at   []time.Duration
	data []byte
}

func (c *completionSink) ReceiveTLP(v tlp.View) {
	c.tags = append(c.tags, v.Tag())
	c.at = append(c.at, c.s.Now())
	c.data = append(c.data, v.Payload()...)
}

// dmaRig is a root complex whose only root port reaches dev directly (no
// link latency), and the sender dev uses upwards.
func dmaRig(t testing.TB, dev pcie.Receiver) (*sim.Sim, *RootComplex, pcie.Sender) {
	s := sim.New(1)
	rc := New(s, Config{MemLatency: 250 * time.Nanosecond})
	up, err := rc.AddRootPort(&pcie.LinkPath{S: s}, dev)
	if err != nil {
		t.Fatal(err)
	}
	return s, rc, up
}

// TestDMAReadsAnsweredInOrderAfterMemLatency sends reads at different
// instants: each is answered MemLatency after it arrived, in arrival
// order, with memory as it stands when DRAM answers (a write that lands
// in between is seen).
func TestDMAReadsAnsweredInOrderAfterMemLatency(t *testing.T) {
	t.Parallel()
	sink := &completionSink{}
	s, rc, up := dmaRig(t, sink)
	sink.s = s
	id := tlp.NewID(3, 0, 0)
	want := make([]byte, 3*128)
	for i := range want {
		want[i] = byte(i*5 + 1)
	}
	rc.Mem.Write(0x1000, want[:128])
	rc.Mem.Write(0x1100, want[256:])
	for i, at := range []time.Duration{0, 100, 100} {
		s.At(at, func() { up.SendTLP(pcie.AppendMRd(nil, id, uint16(7+i), 0x1000+uint64(i)*128, 128)) })
	}
	// Lands after the second read arrived, before DRAM answers it.
	s.At(200, func() { rc.Mem.Write(0x1080, want[128:256]) })
	s.Run(-1)
	if len(sink.tags) != 3 || sink.tags[0] != 7 || sink.tags[1] != 8 || sink.tags[2] != 9 {
		t.Fatalf("completion tags %v, want [7 8 9]", sink.tags)
	}
	for i, at := range []time.Duration{250, 350, 350} {
		if sink.at[i] != at {
			t.Fatalf("completion %d at %v, want %v", i, sink.at[i], at)
		}
	}
	if !bytes.Equal(sink.data, want) {
		t.Fatal("completions carry other data than memory held when DRAM answered")
	}
	if rc.Stats.DMAReads != 3 || rc.Stats.DMAReadBytes != 384 {
		t.Fatalf("stats: %d reads, %d bytes", rc.Stats.DMAReads, rc.Stats.DMAReadBytes)
	}
}

// BenchmarkDMARead is one 512-byte read request answered by DRAM with two
// 256-byte completions: it allocates nothing.
func BenchmarkDMARead(b *testing.B) {
	var n int
	s, rc, up := dmaRig(b, pcie.ReceiverFunc(func(v tlp.View) { n += len(v.Payload()) }))
	rc.Ports[0].Cfg.Set16(PortCapPCIe+8, 1<<5) // MPS 256
	rc.Mem.Fill(0, 0xab, 1<<20)
	reqs := make([][]byte, 64)
	for i := range reqs {
		reqs[i] = pcie.AppendMRd(nil, tlp.NewID(3, 0, 0), uint16(i), uint64(i)*512, 512)
	}
	b.SetBytes(512)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		up.SendTLP(reqs[i%len(reqs)])
		if i%len(reqs) == len(reqs)-1 {
			s.Run(-1)
		}
	}
	s.Run(-1)
	if n == 0 {
		b.Fatal("no completion data")
	}
}
