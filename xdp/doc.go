// Package xdp is the fast path of the dxpu switch: an XDP program (switch.c)
// that forwards dxpu frames between the bridges of each host-GPU pair, and
// its Go loader.
package xdp
