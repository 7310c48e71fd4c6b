package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp"
)

// headerDefines returns the integer #defines of include/dxpu_bridge.h.
func headerDefines(t *testing.T) map[string]int64 {
	t.Helper()
	src, err := os.ReadFile("include/dxpu_bridge.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int64{}
	re := regexp.MustCompile(`(?m)^#define (DXPU_\w+)\s+\(?(-?\d+)u?( << (DXPU_\w+))?\)?`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			t.Fatalf("#define %s %s: %v", m[1], m[2], err)
		}
		if m[4] != "" {
			v <<= defs[m[4]]
		}
		defs[m[1]] = v
	}
	return defs
}

// TestHeaderMatchesGo: every number the header promises is the one the
// Go side uses.
func TestHeaderMatchesGo(t *testing.T) {
	t.Parallel()
	defs := headerDefines(t)
	want := map[string]int64{
		"DXPU_OK": codeOK, "DXPU_MORE": codeMore, "DXPU_E_INVAL": codeInval, "DXPU_E_HANDLE": codeHandle,
		"DXPU_E_SHORT": codeShort, "DXPU_E_CONFIG": codeConfig, "DXPU_E_FRAME": codeFrame, "DXPU_E_TLP": codeTLP,
		"DXPU_E_BUSY": codeBusy, "DXPU_E_NOTUP": codeNotUp, "DXPU_E_RELEASE": codeRelease, "DXPU_E_TIME": codeTime,
		"DXPU_E_LIMIT": codeLimit, "DXPU_E_INTERNAL": codeInternal,
		"DXPU_MAX_FRAME": 65535, "DXPU_MAX_TLP": tlp.Header4DW + 4096 + 4, "DXPU_MAX_BRIDGES": maxBridges,
		"DXPU_ROLE_HOST": int64(bridge.RoleHost), "DXPU_ROLE_GPU": int64(bridge.RoleGPU),
		"DXPU_CLASS_POSTED": int64(tlp.Posted), "DXPU_CLASS_NONPOSTED": int64(tlp.NonPosted),
		"DXPU_CLASS_COMPLETION": int64(tlp.Completion),
		"DXPU_ACCEPT_POSTED":    int64(bridge.AcceptPosted), "DXPU_ACCEPT_NONPOSTED": int64(bridge.AcceptNonPosted),
		"DXPU_ACCEPT_COMPLETION": int64(bridge.AcceptCompletion), "DXPU_ACCEPT_ALL": int64(bridge.AcceptAll),
		"DXPU_STATE_INIT": int64(bridge.StateInit), "DXPU_STATE_UP": int64(bridge.StateUp),
		"DXPU_STATE_DOWN":    int64(bridge.StateDown),
		"DXPU_EVENT_LINK_UP": int64(bridge.EventLinkUp), "DXPU_EVENT_LINK_DOWN": int64(bridge.EventLinkDown),
		"DXPU_EVENT_SURPRISE_REMOVAL":   int64(bridge.EventSurpriseRemoval),
		"DXPU_EVENT_POSTED_LOST":        int64(bridge.EventPostedLost),
		"DXPU_EVENT_COMPLETION_TIMEOUT": int64(bridge.EventCompletionTimeout),
		"DXPU_ABI_VERSION":              2, "DXPU_E_KEY": codeKey,
		"DXPU_EVENT_TX_KEY": int64(eventTxKey), "DXPU_EVENT_RX_KEY": int64(eventRxKey),
		"DXPU_KEY_LEN": seal.KeyLen, "DXPU_KEY_NONCE_LEN": bridge.KeyNonceLen,
		"DXPU_SEAL_GCM": int64(seal.ModeGCM), "DXPU_SEAL_GMAC": int64(seal.ModeGMAC), "DXPU_SEAL_OVERHEAD": seal.Overhead,
	}
	for name, v := range want {
		got, ok := defs[name]
		switch {
		case !ok:
			t.Errorf("%s: not defined in the header", name)
		case got != v:
			t.Errorf("%s: header %d, Go %d", name, got, v)
		}
	}
	if len(codeNames) != -codeKey+1 {
		t.Errorf("%d code names for codes 0..%d", len(codeNames), codeKey)
	}
	for i, s := range codeNames {
		if s == "" {
			t.Errorf("code %d has no name", -i)
		}
	}
}

// TestEveryExportHasAPrototype: the header declares each function
// export.go exports (abicheck.c then proves the types agree).
func TestEveryExportHasAPrototype(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("export.go")
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := os.ReadFile("include/dxpu_bridge.h")
	if err != nil {
		t.Fatal(err)
	}
	exports := regexp.MustCompile(`(?m)^//export (\w+)$`).FindAllSubmatch(src, -1)
	if len(exports) < 15 {
		t.Fatalf("found %d exports in export.go", len(exports))
	}
	for _, m := range exports {
		proto := regexp.MustCompile(`(?m)^[a-z_ ]+[ *]` + string(m[1]) + `\(`)
		if !proto.Match(hdr) {
			t.Errorf("%s is exported but has no prototype in include/dxpu_bridge.h", m[1])
		}
	}
}

// TestHeaderNamesTheDefaults: the header's comments on the buffer sizes
// say the defaults a zero field takes, as bridge.Config.Defaults sets them
// (they said 256/64/64 for a release after the defaults grew).
func TestHeaderNamesTheDefaults(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("include/dxpu_bridge.h")
	if err != nil {
		t.Fatal(err)
	}
	d := bridge.Config{}.Defaults()
	for _, c := range []struct {
		field string
		want  int
	}{{"window", d.Window}, {"tx_queue", d.TxQueue}, {"credits", d.Credits[tlp.Posted].Headers}} {
		re := regexp.MustCompile(`(?m)^\s+[^;/]* ` + c.field + `(\[\d\])?;\s+/\*[^:]*: (\d+)`)
		m := re.FindStringSubmatch(string(src))
		if m == nil {
			t.Errorf("%s: no 'name: default' comment in the header", c.field)
			continue
		}
		if m[2] != strconv.Itoa(c.want) {
			t.Errorf("%s: the header says %s, bridge.Config.Defaults %d", c.field, m[2], c.want)
		}
	}
}
