// Package layering holds the test that keeps dxpu's imports flowing one way:
//
//	cmd/dxpu                       flags, exit codes
//	   │
//	internal/app/...               products: bridged, switchd, demo, benchmarks, capture
//	   │
//	fabric/... xdp/...   emu/...   model/...
//	   │          (emu/replay implements model.Measurer)
//	bridge/...                     the link: sans-I/O pair state, thin drivers
//	   │
//	tlp/...                        the language: TLPs, frames, captures
//
// sim (the virtual clock) and internal/strictjson (JSON's duplicate and
// miscased keys) may be used by every layer. Rigs under internal/
// (pairsim, switchtest, fakeagent, etcdtest, xdptest, privtest) serve tests;
// nothing shipped in the binary imports testing, httptest or a test-only rig.
package layering
