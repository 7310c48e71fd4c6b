// Package shareddata finds the read-only files shared beside the project:
// ../shared relative to the module root (the directory holding dxpu's
// go.mod). It holds the NetTLP captures (testdata/nettlp), the profiler
// traces (traces) and the reference notes (reference).
//
// Root, FindDir, FindFile and FindFiles are for any code: they return an
// error wrapping ErrNotFound when the files are absent. Tests do not call
// them directly: they go through the one test gate, internal/privtest
// (SharedDir, SharedFile, SharedFiles, NetTLPCaptures, Traces), which skips
// the test or, with DXPU_REQUIRE_SHARED=1 (set by .ci/run), fails it.
//
// The package does not import testing: production code (the demo) uses it.
package shareddata
