package main

import (
	"errors"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
)

// Return codes, as include/dxpu_bridge.h defines them (a test compares).
const (
	codeOK       = 0
	codeMore     = 1
	codeInval    = -1
	codeHandle   = -2
	codeShort    = -3
	codeConfig   = -4
	codeFrame    = -5
	codeTLP      = -6
	codeBusy     = -7
	codeNotUp    = -8
	codeRelease  = -9
	codeTime     = -10
	codeLimit    = -11
	codeInternal = -12
	codeKey      = -13
)

// codeNames are what dxpu_strerror returns, by -code.
var codeNames = [...]string{
	-codeOK:       "DXPU_OK: success",
	-codeInval:    "DXPU_E_INVAL: NULL pointer or argument out of range",
	-codeHandle:   "DXPU_E_HANDLE: unknown or freed bridge handle",
	-codeShort:    "DXPU_E_SHORT: buffer too small (*len holds the size needed)",
	-codeConfig:   "DXPU_E_CONFIG: configuration rejected",
	-codeFrame:    "DXPU_E_FRAME: frame dropped (malformed, another pair, stale or out of protocol)",
	-codeTLP:      "DXPU_E_TLP: malformed TLP",
	-codeBusy:     "DXPU_E_BUSY: queue or tag table full, offer the TLP again later",
	-codeNotUp:    "DXPU_E_NOTUP: link not up yet",
	-codeRelease:  "DXPU_E_RELEASE: more credits released than TLPs delivered",
	-codeTime:     "DXPU_E_TIME: time went backwards",
	-codeLimit:    "DXPU_E_LIMIT: too many bridges open",
	-codeInternal: "DXPU_E_INTERNAL: internal error (a library bug, contained)",
	-codeKey:      "DXPU_E_KEY: key refused (unkeyed bridge, wrong length, or a generation not above the ones held)",
}

// codeName returns the text for a code; DXPU_MORE and unknown codes have
// their own.
func codeName(code int) string {
	switch {
	case code == codeMore:
		return "DXPU_MORE: one item returned"
	case code <= 0 && -code < len(codeNames):
		return codeNames[-code]
	}
	return "unknown dxpu error code"
}

// codeOf maps an error of package bridge to its code.
func codeOf(err error) int {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, bridge.ErrBusy):
		return codeBusy
	case errors.Is(err, bridge.ErrNotUp):
		return codeNotUp
	case errors.Is(err, bridge.ErrFrame):
		return codeFrame
	case errors.Is(err, bridge.ErrMalformedTLP):
		return codeTLP
	case errors.Is(err, bridge.ErrRelease):
		return codeRelease
	case errors.Is(err, bridge.ErrUnkeyed), errors.Is(err, seal.ErrKey):
		return codeKey
	case errors.Is(err, bridge.ErrConfig):
		return codeConfig
	}
	return codeInval
}
