// Package shareddata finds the read-only files shared beside the project:
// ../shared relative to the module root (the directory holding dxpu's
// go.mod). It holds the NetTLP captures (testdata/nettlp), the profiler
// traces (traces) and the reference notes (reference).
//
// Root is for any code, tests or not. Dir, File, Files, NetTLPCaptures and
// Traces are for tests: when the files are absent they skip the test, but
// with DXPU_REQUIRE_SHARED=1 in the environment (set by .ci/run) they fail
// it instead, so CI can never pass by skipping.
package shareddata
