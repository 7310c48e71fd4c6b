//go:build !linux

// Package mmsg makes sendmmsg(2) and recvmmsg(2) calls without
// allocating; it is empty where the system has none.
package mmsg
