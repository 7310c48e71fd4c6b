// Package switchreplay is `dxpu replay`: it switches every frame of a
// capture as the dxpu switch would (the Go forwarder, or the XDP program
// under BPF_PROG_TEST_RUN in a private network namespace), writes the
// forwarded frames, rewritten, to a capture, and compares them with an
// expected capture frame by frame.
package switchreplay
