// Command libdxpubridge is the C ABI of the sans-I/O bridge core (package
// bridge), built as a library rather than a program:
//
//	go build -buildmode=c-archive -o libdxpubridge.a ./cmd/libdxpubridge
//	go build -buildmode=c-shared -o libdxpubridge.so ./cmd/libdxpubridge
//
// The interface is the hand-written header include/dxpu_bridge.h: opaque
// integer handles (never a Go pointer held by C), plain C structures, every
// function returning an error code, no callbacks: the caller polls for
// frames, TLPs and events. example/pair.c runs the host side of a pair over
// UDP with it; example/badinput.c feeds it bad input from C.
//
// The Go side of the boundary is split so that most of it builds and is
// tested without cgo: table.go (handles), ops.go (each call on a handle,
// over Go slices), codes.go (error codes); export.go only converts C types
// and is compiled when cgo is on.
//
// Threading: each handle has its own lock, so concurrent calls on one
// handle are serialized rather than undefined; the handle table has a
// read-mostly lock. A panic inside a call (a bug) is contained: the call
// returns DXPU_E_INTERNAL and the handle is dead from then on, so a host
// program is never brought down by the library.
package main

// main is never run: a c-archive or c-shared library needs a main package.
func main() {}
