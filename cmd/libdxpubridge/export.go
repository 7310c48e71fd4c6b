//go:build cgo

package main

// The header is included for its types only: cgo declares the exported
// functions itself, without the const of the public prototypes.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#define DXPU_BRIDGE_TYPES_ONLY
#include "dxpu_bridge.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// maxIn bounds input lengths (far above any valid frame or TLP) so that a
// garbage length is refused instead of becoming a slice over the address
// space; maxOut clamps output capacities (nothing written is longer).
const (
	maxIn  = 1 << 20
	maxOut = 1 << 17
)

// names are dxpu_strerror's static strings, made once and never freed.
var names, unknownName = func() ([]*C.char, *C.char) {
	n := make([]*C.char, len(codeNames))
	for i, s := range codeNames {
		n[i] = C.CString(s)
	}
	return n, C.CString(codeName(1 << 20))
}()

var moreName = C.CString(codeName(codeMore))

// guard turns a panic outside a handle's call (in argument conversion) into
// DXPU_E_INTERNAL.
func guard(rc *C.int) {
	if recover() != nil {
		*rc = codeInternal
	}
}

// in returns the caller's input bytes, or false for NULL or a length out
// of range. The slice is used during the call only.
func in(p *C.uint8_t, n C.size_t) ([]byte, bool) {
	if p == nil || n > maxIn {
		return nil, false
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n)), true
}

// out returns the caller's output buffer (NULL is a zero-length buffer:
// the call then reports the length needed).
func out(p *C.uint8_t, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(min(n, maxOut)))
}

// putString copies s into dst (cap n) NUL-terminated, cut to fit.
func putString(dst *C.char, n C.size_t, s string) {
	if dst == nil || n == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), int(min(n, maxOut)))
	k := copy(b[:len(b)-1], s)
	b[k] = 0
}

//export dxpu_abi_version
func dxpu_abi_version() C.int { return C.DXPU_ABI_VERSION }

//export dxpu_strerror
func dxpu_strerror(code C.int) *C.char {
	switch {
	case code == codeMore:
		return moreName
	case code <= 0 && int(-code) < len(names):
		return names[-code]
	}
	return unknownName
}

//export dxpu_bridge_new
func dxpu_bridge_new(c *C.struct_dxpu_bridge_config, errbuf *C.char, errlen C.size_t) (h C.dxpu_bridge) {
	defer func() {
		if p := recover(); p != nil {
			putString(errbuf, errlen, fmt.Sprintf("contained panic: %v", p))
			h = codeInternal
		}
	}()
	if c == nil {
		putString(errbuf, errlen, "dxpu_bridge_new: cfg is NULL")
		return codeInval
	}
	cfg, err := configFrom(c)
	if err != nil {
		putString(errbuf, errlen, "dxpu_bridge_new: "+err.Error())
		return C.dxpu_bridge(codeOf(err))
	}
	id, code, err := opNew(cfg)
	if err != nil {
		putString(errbuf, errlen, "dxpu_bridge_new: "+err.Error())
		return C.dxpu_bridge(code)
	}
	putString(errbuf, errlen, "")
	return C.dxpu_bridge(id)
}

// configFrom converts the C configuration, checking what the conversion
// could hide (values too wide for their Go field, reserved bytes).
func configFrom(c *C.struct_dxpu_bridge_config) (bridge.Config, error) {
	if c.role > 255 {
		return bridge.Config{}, fmt.Errorf("%w: role: %d is neither DXPU_ROLE_HOST nor DXPU_ROLE_GPU", bridge.ErrConfig, c.role)
	}
	for i, r := range c.reserved {
		if r != 0 {
			return bridge.Config{}, fmt.Errorf("%w: reserved[%d] is %d, want 0", bridge.ErrConfig, i, r)
		}
	}
	if c.pair_id == 0 {
		// As dxpu bridge, the manager and the kit: 0 is no pair.
		return bridge.Config{}, fmt.Errorf("%w: PairID 0: want 1..16777215 (0 is no pair)", bridge.ErrConfig)
	}
	if c.n_id_map > 1<<16 || c.n_id_map > 0 && c.id_map == nil {
		return bridge.Config{}, fmt.Errorf("%w: id_map: %d entries at %p", bridge.ErrConfig, c.n_id_map, c.id_map)
	}
	cfg := bridge.Config{
		Role:              bridge.Role(c.role),
		PairID:            uint32(c.pair_id),
		MTU:               int(c.mtu),
		MaxPayload:        int(c.max_payload),
		Window:            int(c.window),
		TxQueue:           int(c.tx_queue),
		InfiniteQueue:     int(c.infinite_queue),
		TagBits:           int(c.tag_bits),
		MaxOutstanding:    int(c.max_outstanding),
		CompletionTimeout: time.Duration(c.completion_timeout_ns),
		AckDelay:          time.Duration(c.ack_delay_ns),
		InitialRTO:        time.Duration(c.initial_rto_ns),
		MinRTO:            time.Duration(c.min_rto_ns),
		MaxRTO:            time.Duration(c.max_rto_ns),
		Keepalive:         time.Duration(c.keepalive_ns),
		DeadAfter:         time.Duration(c.dead_after_ns),
		HelloInterval:     time.Duration(c.hello_interval_ns),
		ConvertType1:      c.convert_type1 != 0,
		DownstreamBus:     uint8(c.downstream_bus),
		PeerID:            tlp.ID(c.peer_id),
		AutoRelease:       c.auto_release != 0,
		Seed:              uint64(c.seed),
	}
	if c.convert_type1 > 1 || c.auto_release > 1 {
		return bridge.Config{}, fmt.Errorf("%w: convert_type1 and auto_release are 0 or 1", bridge.ErrConfig)
	}
	for i := range cfg.Credits {
		cfg.Credits[i] = bridge.ClassCredits{Headers: int(c.credits[i].headers), Data: int(c.credits[i].data)}
	}
	if c.n_id_map > 0 {
		m := unsafe.Slice(c.id_map, int(c.n_id_map))
		cfg.IDMap = make([]bridge.IDMapping, len(m))
		for i, e := range m {
			cfg.IDMap[i] = bridge.IDMapping{Local: tlp.ID(e.local), Wire: tlp.ID(e.wire)}
		}
	}
	return cfg, nil
}

//export dxpu_bridge_free
func dxpu_bridge_free(h C.dxpu_bridge) (rc C.int) {
	defer guard(&rc)
	return C.int(opFree(int64(h)))
}

//export dxpu_bridge_handle_frame
func dxpu_bridge_handle_frame(h C.dxpu_bridge, now C.int64_t, frame *C.uint8_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	b, ok := in(frame, n)
	if !ok {
		return codeInval
	}
	return C.int(opHandleFrame(int64(h), time.Duration(now), b))
}

//export dxpu_bridge_next_frame
func dxpu_bridge_next_frame(h C.dxpu_bridge, now C.int64_t, buf *C.uint8_t, capacity C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	if n == nil {
		return codeInval
	}
	k, code := opNextFrame(int64(h), time.Duration(now), out(buf, capacity))
	*n = C.size_t(k)
	return C.int(code)
}

//export dxpu_bridge_send_tlp
func dxpu_bridge_send_tlp(h C.dxpu_bridge, now C.int64_t, t *C.uint8_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	b, ok := in(t, n)
	if !ok {
		return codeInval
	}
	return C.int(opSendTLP(int64(h), time.Duration(now), b))
}

//export dxpu_bridge_next_tlp
func dxpu_bridge_next_tlp(h C.dxpu_bridge, accept C.uint32_t, buf *C.uint8_t, capacity C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	if n == nil {
		return codeInval
	}
	k, code := opNextTLP(int64(h), uint32(accept), out(buf, capacity))
	*n = C.size_t(k)
	return C.int(code)
}

//export dxpu_bridge_release
func dxpu_bridge_release(h C.dxpu_bridge, cls, headers, data C.uint32_t) (rc C.int) {
	defer guard(&rc)
	return C.int(opRelease(int64(h), uint32(cls), uint32(headers), uint32(data)))
}

//export dxpu_bridge_next_event
func dxpu_bridge_next_event(h C.dxpu_bridge, ev *C.struct_dxpu_event) (rc C.int) {
	defer guard(&rc)
	if ev == nil {
		return codeInval
	}
	return C.int(opNextEvent(int64(h), func(e *bridge.Event, gen uint32) { eventTo(ev, e); ev.generation = C.uint32_t(gen) }))
}

// eventTo fills the C event from e.
func eventTo(ev *C.struct_dxpu_event, e *bridge.Event) {
	*ev = C.struct_dxpu_event{
		kind:         C.uint32_t(e.Kind),
		session:      C.uint32_t(e.Session),
		at_ns:        C.int64_t(e.At),
		count:        C.uint32_t(min(e.Count, 1<<32-1)),
		requester_id: C.uint16_t(e.RequesterID),
		tag:          C.uint16_t(e.Tag),
	}
	k := copy(ev.addrs[:], unsafe.Slice((*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(e.Addrs))), len(e.Addrs)))
	ev.n_addrs = C.uint32_t(k)
	r := unsafe.Slice((*byte)(unsafe.Pointer(&ev.reason[0])), len(ev.reason))
	r[copy(r[:len(r)-1], e.Reason)] = 0
}

//export dxpu_bridge_deadline
func dxpu_bridge_deadline(h C.dxpu_bridge, d *C.int64_t) (rc C.int) {
	defer guard(&rc)
	if d == nil {
		return codeInval
	}
	v, code := opDeadline(int64(h))
	if code == codeOK {
		*d = C.int64_t(v)
	}
	return C.int(code)
}

//export dxpu_bridge_on_timer
func dxpu_bridge_on_timer(h C.dxpu_bridge, now C.int64_t) (rc C.int) {
	defer guard(&rc)
	return C.int(opOnTimer(int64(h), time.Duration(now)))
}

//export dxpu_bridge_reset
func dxpu_bridge_reset(h C.dxpu_bridge, now C.int64_t) (rc C.int) {
	defer guard(&rc)
	return C.int(opReset(int64(h), time.Duration(now)))
}

//export dxpu_bridge_state
func dxpu_bridge_state(h C.dxpu_bridge, s *C.uint32_t) (rc C.int) {
	defer guard(&rc)
	if s == nil {
		return codeInval
	}
	v, code := opState(int64(h))
	if code == codeOK {
		*s = C.uint32_t(v)
	}
	return C.int(code)
}

//export dxpu_bridge_counters
func dxpu_bridge_counters(h C.dxpu_bridge, c *C.struct_dxpu_counters) (rc C.int) {
	defer guard(&rc)
	if c == nil {
		return codeInval
	}
	v, code := opCounters(int64(h))
	if code != codeOK {
		return C.int(code)
	}
	u := func(x uint64) C.uint64_t { return C.uint64_t(x) }
	*c = C.struct_dxpu_counters{
		frames_sent: u(v.FramesSent), frames_received: u(v.FramesReceived),
		bytes_sent: u(v.BytesSent), bytes_received: u(v.BytesReceived),
		frames_dropped:  u(v.FramesDropped),
		tlps_from_local: u(v.TLPsFromLocal), tlps_sent: u(v.TLPsSent), retransmits: u(v.Retransmits), rtos: u(v.RTOs),
		tlps_received: u(v.TLPsReceived), tlps_delivered: u(v.TLPsDelivered),
		payload_bytes_rx: u(v.PayloadBytesRx), payload_bytes_tx: u(v.PayloadBytesTx),
		acks_sent: u(v.AcksSent), naks_sent: u(v.NaksSent), naks_received: u(v.NaksReceived), keepalives_sent: u(v.KeepalivesSent),
		duplicates: u(v.Duplicates), out_of_window: u(v.OutOfWindow), rx_overruns: u(v.RxOverruns), bogus_credits: u(v.BogusCredits),
		tag_stalls: u(v.TagStalls), tags_in_use: u(v.TagsInUse), tags_high_water: u(v.TagsHighWater),
		completion_timeouts: u(v.CompletionTimeouts), unmatched_completions: u(v.UnmatchedCompletions), late_completions: u(v.LateCompletions),
		byte_count_mismatches: u(v.ByteCountMismatches),
		synthesized_ur:        u(v.SynthesizedUR), synthesized_ca: u(v.SynthesizedCA),
		posted_lost: u(v.PostedLost), completions_lost: u(v.CompletionsLost), stale_requests_dropped: u(v.StaleRequestsDropped),
		link_ups: u(v.LinkUps), link_downs: u(v.LinkDowns),
		srtt_ns: C.int64_t(v.SRTT), rto_ns: C.int64_t(v.RTO),
	}
	for i, s := range v.CreditStalls {
		c.credit_stalls[i] = u(s)
	}
	return codeOK
}

//export dxpu_bridge_last_error
func dxpu_bridge_last_error(h C.dxpu_bridge, buf *C.char, n C.size_t) (rc C.int) {
	defer guard(&rc)
	code, msg := opLastError(int64(h))
	putString(buf, n, msg)
	return C.int(code)
}

//export dxpu_tlp_credits
func dxpu_tlp_credits(t *C.uint8_t, n C.size_t, cls, headers, data *C.uint32_t) (rc C.int) {
	defer guard(&rc)
	b, ok := in(t, n)
	if !ok {
		return codeInval
	}
	c, hd, d, code, err := tlpCredits(b)
	if errors.Is(err, bridge.ErrMalformedTLP) {
		return C.int(code)
	}
	for _, o := range []struct {
		p *C.uint32_t
		v int
	}{{cls, int(c)}, {headers, hd}, {data, d}} {
		if o.p != nil {
			*o.p = C.uint32_t(o.v)
		}
	}
	return codeOK
}
