//go:build cgo

package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#define DXPU_BRIDGE_TYPES_ONLY
#include "dxpu_bridge.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/dxpu/dxpu/bridge"
)

//export dxpu_bridge_new_keyed
func dxpu_bridge_new_keyed(c *C.struct_dxpu_bridge_config, k *C.struct_dxpu_bridge_keys, errbuf *C.char, errlen C.size_t) (h C.dxpu_bridge) {
	if k == nil {
		return dxpu_bridge_new(c, errbuf, errlen)
	}
	defer func() {
		if p := recover(); p != nil {
			putString(errbuf, errlen, fmt.Sprintf("contained panic: %v", p))
			h = codeInternal
		}
	}()
	if c == nil {
		putString(errbuf, errlen, "dxpu_bridge_new_keyed: cfg is NULL")
		return codeInval
	}
	if k.key == nil {
		putString(errbuf, errlen, "dxpu_bridge_new_keyed: keys->key is NULL")
		return codeInval
	}
	cfg, err := configFrom(c)
	if err == nil {
		for i, r := range k.reserved {
			if r != 0 {
				err = fmt.Errorf("%w: keys reserved[%d] is %d, want 0", bridge.ErrConfig, i, r)
			}
		}
	}
	if err == nil {
		key := unsafe.Slice((*byte)(unsafe.Pointer(k.key)), C.DXPU_KEY_LEN)
		err = keysConfig(&cfg, key, uint32(k.generation), uint32(k.seal_mode), uint64(k.rekey_after))
	}
	if err != nil {
		putString(errbuf, errlen, "dxpu_bridge_new_keyed: "+err.Error())
		return C.dxpu_bridge(codeOf(err))
	}
	var wall time.Time
	if k.wall_clock_ns > 0 {
		wall = time.Unix(0, int64(k.wall_clock_ns))
	}
	id, code, err := opNewKeyed(cfg, wall)
	if err != nil {
		putString(errbuf, errlen, "dxpu_bridge_new_keyed: "+err.Error())
		return C.dxpu_bridge(code)
	}
	putString(errbuf, errlen, "")
	return C.dxpu_bridge(id)
}

//export dxpu_bridge_install_key
func dxpu_bridge_install_key(h C.dxpu_bridge, gen C.uint32_t, key *C.uint8_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	b, ok := in(key, n)
	if !ok {
		return codeInval
	}
	return C.int(opInstallKey(int64(h), uint32(gen), b))
}

//export dxpu_bridge_activate_key
func dxpu_bridge_activate_key(h C.dxpu_bridge) (rc C.int) {
	defer guard(&rc)
	return C.int(opActivateKey(int64(h)))
}

//export dxpu_bridge_rekey
func dxpu_bridge_rekey(h C.dxpu_bridge) (rc C.int) {
	defer guard(&rc)
	return C.int(opRekey(int64(h)))
}

//export dxpu_bridge_key_state
func dxpu_bridge_key_state(h C.dxpu_bridge, s *C.struct_dxpu_key_state) (rc C.int) {
	defer guard(&rc)
	if s == nil {
		return codeInval
	}
	k, code := opKeyState(int64(h))
	if code != codeOK {
		return C.int(code)
	}
	*s = C.struct_dxpu_key_state{}
	if !k.keyed {
		return codeOK
	}
	u32 := func(x uint32) C.uint32_t { return C.uint32_t(x) }
	u := func(x uint64) C.uint64_t { return C.uint64_t(x) }
	*s = C.struct_dxpu_key_state{
		keyed: 1, active_generation: u32(k.s.ActiveGeneration), newest_generation: u32(k.s.NewestGeneration),
		tx_generation: u32(k.s.TxGeneration), tx_epoch: u32(k.s.TxEpoch),
		rx_generation: u32(k.s.RxGeneration), rx_epoch: u32(k.s.RxEpoch),
		tx_frames: u(k.s.TxFrames), frames_sealed: u(k.c.FramesSealed), frames_opened: u(k.c.FramesOpened),
		dropped_unsealed: u(k.c.DroppedUnsealed), dropped_forged: u(k.c.DroppedForged), dropped_replayed: u(k.c.DroppedReplayed),
		dropped_unknown_key: u(k.c.DroppedUnknownKey), dropped_no_session: u(k.c.DroppedNoSession),
		tx_rekeys: u(k.c.TxRekeys), rx_rotations: u(k.c.RxKeyRotations),
	}
	return codeOK
}
