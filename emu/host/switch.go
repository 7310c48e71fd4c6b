package host

import (
	"encoding/binary"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Switch is the virtual PCIe switch of a host-side bridge: one upstream port
// facing the host's root port and hot-plug capable downstream ports, each of
// which can hold one remote GPU (one host-GPU pair). It answers config
// requests to its own ports and routes everything else by bus number and
// memory window, like a hardware switch.
type Switch struct {
	s     *sim.Sim
	USP   *Port
	DSPs  []*Port
	up    pcie.Sender
	down  []pcie.Sender
	uspID tlp.ID
	// Latency is the time the switch takes to answer a config request to
	// one of its own ports.
	Latency time.Duration
	// OnHotplug stands for the downstream port's hot-plug interrupt: it is
	// called when a slot's presence changes.
	OnHotplug func(slot int, present bool)
	// URs counts requests answered with Unsupported Request.
	URs uint64
	buf []byte
}

// NewSwitch returns a switch with n downstream ports.
func NewSwitch(s *sim.Sim, n int) *Switch {
	sw := &Switch{s: s, Latency: 100 * time.Nanosecond, down: make([]pcie.Sender, n)}
	sw.USP = NewPort(UpstreamPort, SwitchVendor, SwitchDevice, 0, false)
	for i := 0; i < n; i++ {
		sw.DSPs = append(sw.DSPs, NewPort(DownstreamPort, SwitchVendor, SwitchDevice, i+1, true))
	}
	return sw
}

// AttachUp sets where TLPs going to the host are sent.
func (sw *Switch) AttachUp(up pcie.Sender) { sw.up = up }

// Plug connects a device to downstream port i through path and reports the
// hot-add to the host; it returns the sender the device uses to reach the
// host.
func (sw *Switch) Plug(i int, path pcie.Path, dev pcie.Receiver) pcie.Sender {
	down, up := path.Connect(dspReceiver{sw, i}, dev)
	sw.down[i] = down
	sw.DSPs[i].SetLinkUp(true)
	if sw.OnHotplug != nil {
		sw.OnHotplug(i, true)
	}
	return up
}

// Unplug removes the device behind port i without warning (surprise
// removal): its link goes down, requests to it get Unsupported Request, and
// the host is told.
func (sw *Switch) Unplug(i int) {
	sw.down[i] = nil
	sw.DSPs[i].SetLinkUp(false)
	if sw.OnHotplug != nil {
		sw.OnHotplug(i, false)
	}
}

// Occupied reports whether port i holds a device.
func (sw *Switch) Occupied(i int) bool { return sw.down[i] != nil }

type dspReceiver struct {
	sw *Switch
	i  int
}

// ReceiveTLP forwards a TLP from a downstream device towards the host.
func (r dspReceiver) ReceiveTLP(v tlp.View) {
	if r.sw.up != nil && r.sw.down[r.i] != nil && pcie.Valid(v) {
		r.sw.up.SendTLP(v)
	}
}

// ReceiveTLP handles a TLP arriving from the host.
func (sw *Switch) ReceiveTLP(v tlp.View) {
	if !pcie.Valid(v) {
		return
	}
	k := v.Kind()
	switch k {
	case tlp.CfgRd0, tlp.CfgWr0:
		if k == tlp.CfgWr0 {
			sw.uspID = v.TargetID()
		}
		sw.config(sw.USP, sw.uspID, v)
		return
	case tlp.CfgRd1, tlp.CfgWr1:
		bus := v.TargetID().Bus()
		if bus == sw.USP.Secondary() {
			d := int(v.TargetID().Device())
			if d < len(sw.DSPs) && v.TargetID().Function() == 0 {
				sw.config(sw.DSPs[d], tlp.NewID(bus, uint8(d), 0), v)
			} else {
				sw.ur(v)
			}
			return
		}
	}
	for i, p := range sw.DSPs {
		if !p.Claims(v) {
			continue
		}
		if sw.down[i] == nil {
			break
		}
		if k == tlp.CfgRd1 || k == tlp.CfgWr1 {
			if v.TargetID().Bus() == p.Secondary() {
				if v.TargetID().Device() != 0 {
					sw.ur(v) // only device 0 sits on a point-to-point link
					return
				}
				b := append(sw.buf[:0], v...)
				toType0(b)
				sw.buf = b
				sw.down[i].SendTLP(b)
				return
			}
		}
		sw.down[i].SendTLP(v)
		return
	}
	if k.IsNonPosted() {
		sw.ur(v)
	}
}

func (sw *Switch) config(p *Port, id tlp.ID, v tlp.View) {
	req, tag, reg := v.RequesterID(), v.Tag(), v.Register()
	var out []byte
	if v.HasData() {
		var d [4]byte
		copy(d[:], v.Payload())
		p.Cfg.Write(reg, v.FirstBE(), d)
		out = pcie.AppendCpl(nil, id, req, tag, tlp.StatusSC, 4)
	} else {
		var d [4]byte
		binary.LittleEndian.PutUint32(d[:], p.Cfg.Read32(reg))
		out = pcie.AppendCplD(nil, id, req, tag, 4, 0, d[:])
	}
	sw.s.After(sw.Latency, func() {
		if sw.up != nil {
			sw.up.SendTLP(out)
		}
	})
}

func (sw *Switch) ur(v tlp.View) {
	sw.URs++
	out := pcie.AppendCpl(nil, sw.uspID, v.RequesterID(), v.Tag(), tlp.StatusUR, 4)
	sw.s.After(sw.Latency, func() {
		if sw.up != nil {
			sw.up.SendTLP(out)
		}
	})
}
