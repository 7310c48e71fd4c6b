package pairsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/dxpu/dxpu/bridge/vpair"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// Mix is the traffic a stub Endpoint issues: relative weights of posted
// memory writes, memory reads and config reads, and their sizes.
type Mix struct {
	Write, Read, Config float64
	WriteBytes          int // payload of each write (multiple of 4, <= MaxPayload)
	ReadBytes           int // bytes of each read (multiple of 4, <= 4096)
}

// DefaultMix is 60% 256-byte writes, 35% 512-byte reads, 5% config reads.
var DefaultMix = Mix{Write: 0.6, Read: 0.35, Config: 0.05, WriteBytes: 256, ReadBytes: 512}

// writeBase is where stub writes go; write n targets writeBase + n*4096, so
// the address names the write in loss reports.
const writeBase = 0x10_0000_0000

// readBase is where stub reads go; see Endpoint.read.
const readBase = 0x20_0000_0000

// Endpoint is a stub PCIe function on one side of a Pair: a requester that
// issues Count TLPs of Mix every Interval, and a completer that answers
// memory reads with completions split at RCB and MPS, and config reads with
// one DW. It checks what it receives: posted writes from the peer in order
// and exactly once, one final completion per request.
type Endpoint struct {
	Side     *vpair.Side
	ID       tlp.ID
	Mix      Mix
	Count    int
	Interval time.Duration
	MPS, RCB int
	// ServiceTime delays every completion the completer sends.
	ServiceTime time.Duration

	issued   int
	freeTags []uint16
	out      [256]outReq
	scratch  []byte

	// Requester results.
	WritesSent   int
	ReadsSent    int
	Completed    int // requests that got their final successful completion
	Failed       int // requests ended by UR or CA
	ExtraCpls    int // completions for a tag with no request outstanding (a duplicate answer)
	BadCpls      int // completions whose byte count or data disagree
	LostReported map[uint64]bool

	// Completer / receiver results.
	WritesRecv  int
	lastWrite   int64
	Misordered  int
	Duplicated  int
	seenWrites  map[int64]int
	WritesOrder []int64
	ReadsServed int
	// OrderViolations counts a read request, or a completion, that arrived
	// before a posted write its sender had issued earlier (PCIe forbids
	// both passings). Meaningful only in runs without a link down, which
	// may lose writes.
	OrderViolations int
	Events          []bridge.Event
	// Latencies: posted writes one way (measured where they arrive, from a
	// timestamp in their payload), reads from issue to final completion.
	WriteLatency, ReadLatency []time.Duration
	// PayloadIn counts payload bytes of writes and completions received.
	PayloadIn int64
}

type outReq struct {
	active bool
	kind   tlp.Kind
	bytes  int
	got    int
	addr   uint64
	start  time.Duration
}

// NewEndpoint attaches a stub endpoint to sd, replacing its callbacks.
func NewEndpoint(sd *vpair.Side, id tlp.ID, mix Mix, count int, interval time.Duration) *Endpoint {
	e := &Endpoint{Side: sd, ID: id, Mix: mix, Count: count, Interval: interval, MPS: 256, RCB: 64,
		LostReported: map[uint64]bool{}, seenWrites: map[int64]int{}, lastWrite: -1}
	if e.Mix.WriteBytes == 0 {
		e.Mix.WriteBytes = 256
	}
	if e.Mix.ReadBytes == 0 {
		e.Mix.ReadBytes = 512
	}
	for t := 255; t >= 0; t-- {
		e.freeTags = append(e.freeTags, uint16(t))
	}
	sd.OnTLP = e.receive
	sd.OnEvent = e.event
	return e
}

// Start schedules the first request at the simulator's current time.
func (e *Endpoint) Start() {
	if e.Count > 0 {
		e.Side.Sim().After(0, e.tick)
	}
}

// Done reports whether every request was issued and answered.
func (e *Endpoint) Done() bool { return e.issued >= e.Count && e.Outstanding() == 0 }

// Outstanding returns the requests still waiting for their final completion.
func (e *Endpoint) Outstanding() int { return 256 - len(e.freeTags) }

func (e *Endpoint) tick() {
	if e.issued >= e.Count {
		return
	}
	m := e.Mix
	total := m.Write + m.Read + m.Config
	r := e.Side.Sim().Rand().Float64() * total
	var err error
	switch {
	case r < m.Write || total == 0:
		err = e.write()
	case r < m.Write+m.Read:
		err = e.read(tlp.MRd)
	default:
		err = e.read(tlp.CfgRd0)
	}
	if err != nil && !errors.Is(err, bridge.ErrMalformedTLP) {
		panic(fmt.Sprintf("harness: stub built a bad TLP: %v", err)) // a harness bug, not input
	}
	if e.issued < e.Count {
		e.Side.Sim().After(e.Interval, e.tick)
	}
}

func (e *Endpoint) write() error {
	n := e.WritesSent
	data := make([]byte, e.Mix.WriteBytes)
	binary.BigEndian.PutUint64(data, uint64(n))
	if len(data) >= 16 {
		binary.BigEndian.PutUint64(data[8:], uint64(e.Side.Sim().Now()))
	}
	p := tlp.Packet{Kind: tlp.MWr, Addr64: true, RequesterID: e.ID, FirstBE: 0xf, LastBE: 0xf,
		Address: writeBase + uint64(n)*4096, Data: data}
	b, err := p.AppendTo(e.scratch[:0])
	if err != nil {
		return err
	}
	e.scratch = b
	e.issued++
	if err := e.Side.Send(b); err != nil {
		return err // refused (counted by the Side): not sent
	}
	e.WritesSent++
	return nil
}

func (e *Endpoint) read(k tlp.Kind) error {
	if len(e.freeTags) == 0 {
		return nil // all tags busy: skip this slot
	}
	tag := e.freeTags[len(e.freeTags)-1]
	p := tlp.Packet{Kind: k, RequesterID: e.ID, Tag: tag, FirstBE: 0xf}
	o := outReq{active: true, kind: k, start: e.Side.Sim().Now()}
	if k == tlp.MRd {
		p.Addr64 = true
		// The address names how many writes this side had issued: the
		// completer checks they all arrived first (a read request never
		// passes a posted write).
		p.Address = readBase + uint64(e.WritesSent)*4096
		p.Length = uint16(e.Mix.ReadBytes / 4)
		if p.Length > 1 {
			p.LastBE = 0xf
		}
		o.bytes, o.addr = e.Mix.ReadBytes, p.Address
	} else {
		p.Length = 1
		p.TargetID = tlp.NewID(1, 0, 0)
		p.Register = 0x10
		o.bytes = 4
	}
	b, err := p.AppendTo(e.scratch[:0])
	if err != nil {
		return err
	}
	e.scratch = b
	e.issued++
	// Record the request first: a bridge that is down answers at once.
	e.freeTags = e.freeTags[:len(e.freeTags)-1]
	e.out[tag] = o
	e.ReadsSent++
	if err := e.Side.Send(b); err != nil {
		// Refused (counted by the Side): no completion will come.
		e.out[tag].active = false
		e.freeTags = append(e.freeTags, tag)
		e.ReadsSent--
		return err
	}
	return nil
}

func (e *Endpoint) event(ev bridge.Event) {
	e.Events = append(e.Events, ev)
	if ev.Kind == bridge.EventPostedLost {
		for _, a := range ev.Addrs {
			e.LostReported[a] = true
		}
	}
}

func (e *Endpoint) receive(v tlp.View) {
	k := v.Kind()
	switch {
	case k == tlp.MWr:
		n := int64((v.Address() - writeBase) / 4096)
		e.WritesRecv++
		e.seenWrites[n]++
		if e.seenWrites[n] > 1 {
			e.Duplicated++
		}
		if n <= e.lastWrite {
			e.Misordered++
		}
		if p := v.Payload(); len(p) < 8 || int64(binary.BigEndian.Uint64(p)) != n {
			e.Misordered++ // payload and address disagree: damaged write
		}
		e.lastWrite = max(e.lastWrite, n)
		if p := v.Payload(); len(p) >= 16 {
			e.WriteLatency = append(e.WriteLatency, e.Side.Sim().Now()-time.Duration(binary.BigEndian.Uint64(p[8:])))
		}
		e.PayloadIn += int64(v.PayloadLen())
		e.WritesOrder = append(e.WritesOrder, n)
	case k == tlp.MRd:
		e.serveRead(v)
	case k == tlp.CfgRd0 || k == tlp.CfgRd1:
		e.serveConfig(v)
	case k.IsCompletion():
		e.completion(v)
	}
}

// checkOrder: the sender had issued n posted writes before this TLP.
func (e *Endpoint) checkOrder(n int64) {
	if n-1 > e.lastWrite {
		e.OrderViolations++
	}
}

func (e *Endpoint) serveRead(v tlp.View) {
	e.ReadsServed++
	e.checkOrder(int64((v.Address() - readBase) / 4096))
	sp, err := tlp.SplitterFor(v, e.MPS, e.RCB)
	if err != nil {
		return
	}
	req, tag := v.RequesterID(), v.Tag()
	var tlps [][]byte
	for {
		part, ok := sp.Next()
		if !ok {
			break
		}
		data := make([]byte, part.Length*4)
		for i := range data {
			data[i] = byte(part.Address&^3) + byte(i)
		}
		p := tlp.Packet{Kind: tlp.CplD, CompleterID: e.ID, RequesterID: req, Tag: tag,
			ByteCount: uint16(part.ByteCount), LowerAddress: part.LowerAddress, Data: data}
		b, err := p.AppendTo(nil)
		if err != nil {
			return
		}
		tlps = append(tlps, b)
	}
	e.reply(tlps)
}

func (e *Endpoint) serveConfig(v tlp.View) {
	// The data says how many writes this side issued before answering:
	// the requester checks they all arrived before the completion.
	data := binary.BigEndian.AppendUint32(nil, uint32(e.WritesSent))
	p := tlp.Packet{Kind: tlp.CplD, CompleterID: e.ID, RequesterID: v.RequesterID(), Tag: v.Tag(),
		ByteCount: 4, Data: data}
	b, err := p.AppendTo(nil)
	if err != nil {
		return
	}
	e.reply([][]byte{b})
}

func (e *Endpoint) reply(tlps [][]byte) {
	send := func() {
		for _, b := range tlps {
			_ = e.Side.Send(b)
		}
	}
	if e.ServiceTime > 0 {
		e.Side.Sim().After(e.ServiceTime, send)
	} else {
		send()
	}
}

func (e *Endpoint) completion(v tlp.View) {
	tag := v.Tag()
	if tag >= 256 || !e.out[tag].active {
		e.ExtraCpls++
		return
	}
	o := &e.out[tag]
	done := func(ok bool) {
		if ok {
			e.Completed++
			e.ReadLatency = append(e.ReadLatency, e.Side.Sim().Now()-o.start)
		} else {
			e.Failed++
		}
		o.active = false
		e.freeTags = append(e.freeTags, tag)
	}
	if v.Status() != tlp.StatusSC {
		done(false)
		return
	}
	if o.kind != tlp.MRd {
		if v.PayloadLen() != 4 {
			e.BadCpls++
		} else {
			e.checkOrder(int64(binary.BigEndian.Uint32(v.Payload())))
		}
		done(true)
		return
	}
	bc := v.ByteCount()
	if bc != o.bytes-o.got {
		e.BadCpls++
	}
	carried := v.PayloadLen() - int(v.LowerAddress()&3)
	addr := o.addr + uint64(o.got)
	if pl := v.Payload(); len(pl) > 0 && pl[0] != byte(addr&^3) {
		e.BadCpls++
	}
	o.got += carried
	e.PayloadIn += int64(carried)
	if carried >= bc {
		done(true)
	}
}
